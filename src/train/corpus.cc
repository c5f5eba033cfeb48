#include "train/corpus.h"

#include <string>

namespace axle::train {
namespace {

// The corpus lives in several raw string literals, one per corpus_*.inc file, rather than one:
// some compilers cap the length of a single string literal (MSVC at 16 KB per piece), and one
// file per part keeps the text easy to edit. Each part ends with a newline; a blank line goes
// between parts so stories never run together.
constexpr std::string_view kParts[] = {
#include "train/corpus_fables.inc"
    ,
#include "train/corpus_compiler.inc"
    ,
#include "train/corpus_more_fables.inc"
    ,
#include "train/corpus_training.inc"
};

}  // namespace

std::string_view EmbeddedCorpus() {
  // Joined once, on first use (thread-safe static initialization), and kept for the program's
  // life so the returned view never dangles.
  static const std::string corpus = [] {
    std::string s;
    for (std::string_view part : kParts) {
      if (!s.empty()) s += '\n';
      s += part;
    }
    return s;
  }();
  return corpus;
}

}  // namespace axle::train
