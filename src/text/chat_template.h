// Chat templates: the Jinja subset Hugging Face models' tokenizer_config.json "chat_template"s are
// written in, rendered as transformers' apply_chat_template renders them (jinja2 with
// trim_blocks and lstrip_blocks).
//
//   ChatTemplate t = ChatTemplate::Parse(source, "Llama-3.2-1B/tokenizer_config.json");
//   std::string text = t.Render({{"messages", messages}, {"add_generation_prompt", true},
//                                {"bos_token", "<|begin_of_text|>"}, {"eos_token", "<|eot_id|>"}});
//
// The subset: text, {{ expressions }}, {% if / elif / else / endif %}, {% for x in xs [if c] %}
// (also "for k, v in d.items()") with loop.index, index0, first, last, length, revindex,
// {% set x = ... %} and {% set ns.x = ... %} with namespace(...), comments, whitespace control
// ({%- -%}, {{- -}}), {% generation %} markers (transparent). Expressions: literals (strings,
// numbers, true/false/none, lists, dicts), variables, .attr and [index] and [a:b] slices, + - * /
// // % ~, comparisons, in / not in, and / or / not, "x if c else y", tests (is [not] defined, none,
// string, number, mapping, sequence, iterable, boolean, true, false, even, odd), filters (trim,
// length, count, upper, lower, capitalize, title, first, last, join, reverse, list, tojson, string,
// int, float, default, replace, items, selectattr/rejectattr by an attribute's truth or equalto),
// string methods (strip, lstrip, rstrip, upper, lower, startswith, endswith, split, replace,
// title), dict methods (get, items, keys, values), and raise_exception(message), range(),
// namespace(). Anything else is an axle::Error naming the template's source and the line.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace axle::text {

class ChatTemplate {
 public:
  // Parses `source`; `where` names it in errors ("DIR/tokenizer_config.json (chat_template)").
  static ChatTemplate Parse(const std::string& source, const std::string& where);
  // Renders with `context`'s keys as the template's variables. A raise_exception in the template,
  // or an operation on values of the wrong kind, is an axle::Error naming `where` and the line.
  // Objects keep their keys' order (ordered_json), as Python dicts do for tojson.
  std::string Render(const nlohmann::ordered_json& context) const;

  struct Node;  // the parsed template (chat_template_internal.h)

 private:
  std::shared_ptr<const Node> root_;
  std::string where_;
};

}  // namespace axle::text
