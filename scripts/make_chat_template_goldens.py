#!/usr/bin/env python3
"""Writes tests/text/goldens/chat_templates.json: chat templates of real model families (and one
that exercises the rest of the Jinja subset), conversations, and what transformers renders.

    /usr/bin/python3 scripts/make_chat_template_goldens.py

The reference is transformers' own template compiler (the one apply_chat_template uses: jinja2's
sandbox with trim_blocks and lstrip_blocks, its tojson and raise_exception). Each case:
{"name", "template", "context": {messages, add_generation_prompt, bos_token, eos_token},
 "expected": the rendered text, or "error": the exception's message}.
"""
import json
import os

from transformers.utils.chat_template_utils import _compile_jinja_template

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "text", "goldens",
                   "chat_templates.json")

TEMPLATES = {
    "llama3": "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}",
    "qwen2": "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}",
    "zephyr": "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + message['content'] + eos_token }}\n{% elif message['role'] == 'system' %}\n{{ '<|system|>\n' + message['content'] + eos_token }}\n{% elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\n'  + message['content'] + eos_token }}\n{% endif %}\n{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}",
    "llama2": "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}",
    "mistral": "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}",
    # The rest of the subset: namespace, for-if, filters, tests, slices, methods, ternaries,
    # comments, whitespace control, lstrip_blocks / trim_blocks, a trailing newline.
    "features": """{%- set ns = namespace(sys='', n=0) -%}
{%- for m in messages if m.role == 'system' -%}{%- set ns.sys = ns.sys ~ m.content -%}{%- endfor -%}
{%- if ns.sys %}<<{{ ns.sys | upper }}>>
{% endif -%}
{%- for m in messages | rejectattr('role', 'equalto', 'system') -%}
  {%- set ns.n = ns.n + 1 %}
  [{{ loop.index }}/{{ loop.length }}] {{ m['role'] | capitalize }}: {{ m.content | trim }}{{ '' if loop.last else '\\n' }}
{%- endfor %}
{% if add_generation_prompt is defined and add_generation_prompt %}Assistant ({{ ns.n }} turns, {{ messages | length }} messages{{ ', tools' if tools is defined else '' }}):{% endif %}
{# a comment #}
    {% if messages[-1].content.startswith('Why') %}why{% else %}{{ messages[-1].content.split(' ')[0] | lower }}{% endif %}
{{ messages[1:] | map(attribute='role') | list if false else (messages | length) * 2 }} {{ 7 // 2 }} {{ -7 % 3 }} {{ 'abc'[1:] }} {{ [1, 2] + [3] }} {{ {'k': 'v'}.get('k') }} {{ none }} {{ true }} {{ messages[0] | tojson }}
""",
}

CONVERSATIONS = [
    [{"role": "user", "content": "Hello!"}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "  What is 2+2?  "},
     {"role": "assistant", "content": "4"}],
    [{"role": "user", "content": "Why is the sky blue?"}, {"role": "assistant", "content": "Rayleigh scattering.\n"},
     {"role": "user", "content": "Explain more, naïvely 😀"}],
    [{"role": "system", "content": "S"}, {"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
]


def main():
    cases = []
    for name, source in TEMPLATES.items():
        template = _compile_jinja_template(source)
        for ci, messages in enumerate(CONVERSATIONS):
            for gen in (False, True):
                context = {"messages": messages, "add_generation_prompt": gen, "bos_token": "<s>",
                           "eos_token": "</s>"}
                case = {"name": f"{name}/{ci}/{'gen' if gen else 'nogen'}", "template": source, "context": context}
                try:
                    case["expected"] = template.render(**context)
                except Exception as e:  # raise_exception: the message
                    case["error"] = str(e)
                cases.append(case)
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(cases, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{OUT}: {len(cases)} cases, {sum('error' in c for c in cases)} errors")


if __name__ == "__main__":
    main()
