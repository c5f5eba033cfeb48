// The text `axle train` learns from when it is given no --data: a small English corpus compiled
// into the binary, so that a first training run needs no download and no tokenizer.
//
// The text is original (written for Axle: simple fables and a plain-language essay on how a
// deep-learning compiler works), plain ASCII, about 33 KB. Short, repetitive sentences and a
// regular story structure give a tiny byte-level model something it can visibly learn in a few
// hundred steps.
#pragma once

#include <string_view>

namespace axle::train {

// The whole corpus. The view stays valid for the life of the program.
std::string_view EmbeddedCorpus();

}  // namespace axle::train
