// The training loop of `axle train` (trainer.h).
#include "train/trainer.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <optional>
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "axle/autocast.h"
#include "axle/checkpoint.h"
#include "axle/compile.h"
#include "axle/distributed.h"
#include "axle/metrics.h"
#include "axle/nn.h"
#include "axle/optim.h"
#include "axle/tensor.h"
#include "backends/registry.h"
#include "core/error.h"
#include "core/flags.h"
#include "frontend/sharded_step.h"
#include "runtime/world.h"
#include "text/tokenizer.h"
#include "train/corpus.h"
#include "train/data.h"
#include "train/generate.h"
#include "train/instruct.h"
#include "train/parallel.h"
#include "train/train_state.h"

namespace axle::train {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// A field of /proc/self/status in kB ("VmRSS", "VmHWM"), or -1 where there is none.
int64_t ProcStatusKb(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0) return std::atoll(line.c_str() + field.size() + 1);
  return -1;
}

// The allocator this process runs on: tcmalloc when the axle tool was linked with it or it was
// preloaded (Note [The tool's allocator], CMakeLists.txt), else the C library's.
std::string Allocator() {
  using Version = const char* (*)(int*, int*, const char**);
  if (auto v = reinterpret_cast<Version>(::dlsym(RTLD_DEFAULT, "tc_version")))
    return fmt::format("tcmalloc ({})", v(nullptr, nullptr, nullptr));
  return "the C library's malloc";
}

void Validate(const TrainOptions& o) {
  if (o.model != "auto" && o.model != "gpt2" && o.model != "llama")
    Fail("--model {}: expected auto (the family config.json names, else gpt2), gpt2 or llama", o.model);
  if (o.init.empty()) {
    const bool llama = o.model == "llama";
    const std::vector<std::string> presets = llama ? std::vector<std::string>{"tiny", "small", "bench", "tinyllama-1.1b"}
                                                   : std::vector<std::string>{"tiny", "small", "124m"};
    if (std::find(presets.begin(), presets.end(), o.config) == presets.end())
      Fail("--config {}: the {} sizes are {}", o.config, llama ? "Llama" : "GPT-2", fmt::join(presets, ", "));
  }
  if (o.steps < 1) Fail("--steps {}: must be at least 1", o.steps);
  if (o.batch < 1) Fail("--batch {}: must be at least 1", o.batch);
  if (o.seq < 1) Fail("--seq {}: must be at least 1", o.seq);
  if (!(o.lr > 0) || !std::isfinite(o.lr)) Fail("--lr {}: must be a positive number", o.lr);
  if (o.warmup < 0) Fail("--warmup {}: must not be negative", o.warmup);
  if (o.schedule != "constant" && o.schedule != "cosine")
    Fail("--schedule {}: expected constant or cosine", o.schedule);
  if (!(o.weight_decay >= 0)) Fail("--weight-decay {}: must not be negative", o.weight_decay);
  if (!(o.grad_clip >= 0)) Fail("--grad-clip {}: must not be negative (0 = off)", o.grad_clip);
  if (!(o.dropout >= 0 && o.dropout < 1)) Fail("--dropout {}: must be in [0, 1)", o.dropout);
  if (o.precision != "fp32" && o.precision != "bf16-mixed" && o.precision != "bf16")
    Fail("--precision {}: expected fp32, bf16-mixed (bf16 autocast over f32 weights) or bf16 (bf16 weights and "
         "optimizer state)",
         o.precision);
  ParseRematPolicy(o.remat);  // throws naming the policies
  if (!o.memory_budget.empty()) {
    flags::ParseByteSize(o.memory_budget, "--memory-budget");
    if (o.remat != "none")
      Fail("--memory-budget {} and --remat {} exclude each other: the budget's pass chooses what to recompute "
           "(use one or the other)",
           o.memory_budget, o.remat);
  }
  if (o.checkpoint_every < 0) Fail("--checkpoint-every {}: must not be negative", o.checkpoint_every);
  if (o.keep < 0) Fail("--keep {}: must not be negative (0 keeps every checkpoint)", o.keep);
  if (o.stop_at < 0) Fail("--stop-at {}: must not be negative", o.stop_at);
  if (o.chat_template != "auto" && o.chat_template != "axle")
    Fail("--chat-template {}: expected auto (the directory's template, else Axle's) or axle",
         o.chat_template);
  if (o.checkpoint_dir.empty()) {
    if (o.resume) Fail("--resume needs --checkpoint-dir DIR: the directory to continue from");
    if (o.checkpoint_every > 0) Fail("--checkpoint-every needs --checkpoint-dir DIR: where to save");
    if (o.keep > 0) Fail("--keep needs --checkpoint-dir DIR");
    if (o.stop_at > 0) Fail("--stop-at needs --checkpoint-dir DIR: a run stopped early saves its state there");
  }
  if (!o.init.empty() && o.config_given)
    Fail("--config {} and --init {} exclude each other: the model's config comes from the "
         "checkpoint",
         o.config, o.init);
}

// A printable rendering of byte tokens (other vocabularies print token ids).
std::string Render(const std::vector<int32_t>& tokens, int64_t vocab) {
  std::string s;
  if (vocab > 256) {
    for (int32_t t : tokens) s += fmt::format("{} ", t);
    return s;
  }
  for (int32_t t : tokens) {
    const char c = static_cast<char>(t);
    s += (c == '\n' || (t >= 32 && t < 127)) ? c : '?';
  }
  return s;
}

void PrintProgress(int64_t done, int64_t total, double loss, double tok_s) {
  const int width = 30;
  const int filled = static_cast<int>(width * done / std::max<int64_t>(total, 1));
  std::cerr << fmt::format("\r[{}{}] {}/{} loss {:.4f} {:.0f} tok/s", std::string(filled, '#'),
                           std::string(width - filled, ' '), done, total, loss, tok_s)
            << std::flush;
}

// The tokenizer of instruction data: --tokenizer, else the --init directory's.
std::unique_ptr<text::Tokenizer> InstructionTokenizer(const TrainOptions& o) {
  namespace fs = std::filesystem;
  std::string path = o.tokenizer;
  if (path.empty() && !o.init.empty() && fs::is_directory(o.init) && text::FindTokenizerFile(o.init)) path = o.init;
  if (path.empty())
    Fail("--data {} is instruction data (JSONL), which needs the model's tokenizer: --init a model directory with "
         "a tokenizer.json or tokenizer.model, or pass --tokenizer FILE",
         o.data);
  return text::LoadTokenizer(path);
}

// A batch's tensors: inputs and targets, and for packed rows positions and segments.
std::vector<Tensor> BatchTensors(const Batch& b, int64_t rows, int64_t seq) {
  std::vector<Tensor> t = {from_vector<int32_t>(b.inputs, {rows, seq}, DType::kI32),
                           from_vector<int32_t>(b.targets, {rows, seq}, DType::kI32)};
  if (!b.positions.empty()) {
    t.push_back(from_vector<int32_t>(b.positions, {rows, seq}, DType::kI32));
    t.push_back(from_vector<int32_t>(b.segments, {rows, seq}, DType::kI32));
  }
  return t;
}

// The batch of `step` as each device's slice (sharded data loading): a device loads only the rows
// its coordinates along the batch axes select; devices that differ only in other axes (tp) share
// one load.
std::vector<Tensor> LoadShardedBatch(const BatchSource& loader, int64_t step, const spmd::Mesh& mesh) {
  const spmd::PartitionSpec spec = BatchSpec(mesh);
  const ir::Mesh& m = mesh.ir_mesh();
  const int64_t rows = loader.batch() / m.AxesSize(spec[0].names);  // Train checked that it divides
  std::map<int64_t, std::vector<Tensor>> slices;  // block index -> its tensors
  std::vector<std::vector<Tensor>> local;       // per tensor, the local devices' slices
  for (int64_t d = 0; d < m.size(); ++d) {
    if (!runtime::IsLocalDevice(d)) continue;  // another process's device: that process loads it
    const int64_t block = m.ShardIndex(d, spec[0].names);
    auto it = slices.find(block);
    if (it == slices.end())
      it = slices.emplace(block, BatchTensors(loader.GetRows(step, block * rows, rows), rows, loader.seq())).first;
    local.resize(it->second.size());
    for (size_t k = 0; k < it->second.size(); ++k) local[k].push_back(it->second[k]);
  }
  const Dims shape = {loader.batch(), loader.seq()};
  std::vector<Tensor> out;
  for (const auto& shards : local) out.push_back(spmd::from_local_shards(shards, shape, mesh, spec));
  return out;
}

// SIGINT / SIGTERM while a run with a checkpoint directory trains: the loop finishes its step,
// saves, commits and stops (Note [Stopping on a signal]).
std::atomic<int> g_stop_signal{0};

extern "C" void OnStopSignal(int sig) { g_stop_signal.store(sig); }

// Note [Stopping on a signal]
// With --checkpoint-dir, SIGINT and SIGTERM (a preemption notice, Ctrl-C) only set a flag; the
// training loop sees it after the step in flight, saves that step, waits for the commit and
// returns, and `axle train` exits with 128 + the signal. A second signal still only sets the flag
// (the save is what the user asked for); SIGKILL cannot be caught, which the commit protocol
// covers (Note [Checkpoint commit protocol], src/checkpoint/manager.cc). The previous handlers
// come back when Train returns. With several processes the signal may reach one of them or all,
// at different steps; the save is collective, so each process puts what it got into the exchange
// of step times that every step makes, and all stop after the step where one of them reported it.
class StopSignals {
 public:
  explicit StopSignals(bool on) : on_(on) {
    if (!on_) return;
    g_stop_signal.store(0);
    struct sigaction sa = {};
    sa.sa_handler = OnStopSignal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~StopSignals() {
    if (!on_) return;
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  int signal() const { return on_ ? g_stop_signal.load() : 0; }

 private:
  bool on_;
  struct sigaction old_int_ = {}, old_term_ = {};
};

const char* SignalName(int sig) { return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal"; }

}  // namespace

TrainResult Train(const TrainOptions& o, std::ostream& all_out) {
  const Clock::time_point start = Clock::now();
  Validate(o);
  if (o.devices < 0) Fail("--devices {}: must be at least 1", o.devices);
  if (o.devices > 0) flags::set_cpu_devices(o.devices);
  // A run of several processes (torchrun, mpirun, srun, axle launch): --devices is each process's
  // share, the mesh spans them all, and rank 0 does the talking (docs/spmd.md, "Several processes").
  distributed::Init();
  const int rank = distributed::rank(), processes = distributed::world_size();
  std::ostringstream quiet;
  std::ostream& out = rank == 0 ? all_out : quiet;
  if (processes > 1 && !o.save.empty())
    Fail("--save {} in a run of several processes: save with --checkpoint-dir DIR (every process writes its own "
         "shards), then write the weights with `axle export --checkpoint DIR --out HF_DIR` (docs/checkpoint.md)",
         o.save);
  if (processes > 1) {
    // Every process must train the same model on the same data: compare the flags now, with a
    // message that names them, rather than at the first collective.
    const nlohmann::json here = FlagsJson(o);
    const std::string mine = here.dump();
    const auto all = runtime::GetWorld()->AllGatherBytes({reinterpret_cast<const uint8_t*>(mine.data()), mine.size()},
                                                         "the flags of axle train");
    for (size_t r = 0; r < all.size(); ++r) {
      const nlohmann::json there = nlohmann::json::parse(std::string(all[r].begin(), all[r].end()));
      std::vector<std::string> diff;
      for (const auto& [key, value] : here.items())
        if (there.value(key, nlohmann::json()) != value)
          diff.push_back(fmt::format("--{} {} there, {} here", key, there.value(key, nlohmann::json()).dump(),
                                     value.dump()));
      if (!diff.empty())
        Fail("process {} was started with other flags than process {} ({}): every process of a run takes the same "
             "flags",
             r, rank, fmt::join(diff, "; "));
    }
  }
  // --mesh auto: no layouts are marked; each step's are chosen when it is compiled
  // (spmd::auto_shard, docs/spmd.md "Auto-sharding"), and the batch is split on the host.
  const bool auto_sharded = o.mesh == "auto";
  if (!auto_sharded && (!o.mesh_shape.empty() || !o.memory_bound.empty()))
    Fail("--mesh-shape and --memory-bound go with --mesh auto (the compiler's layouts)");
  const std::optional<spmd::Mesh> mesh = auto_sharded ? std::nullopt : ParseMesh(o.mesh, distributed::world_devices());
  struct AutoScope {
    bool on;
    ~AutoScope() {
      if (on) spmd::clear_auto_shard();
    }
  } auto_scope{auto_sharded};
  std::optional<spmd::Mesh> auto_mesh;
  spmd::AutoShardingOptions auto_options;
  if (auto_sharded) {
    auto_mesh = AutoMesh(o.mesh_shape, distributed::world_devices());
    if (!o.memory_bound.empty())
      auto_options.memory_bound_bytes = flags::ParseByteSize(o.memory_bound, "--memory-bound");
    auto_options.time_limit_s = o.auto_time_limit_s;
    auto_options.time_candidates_within = o.auto_timing_within;
  }
  if (mesh && o.batch % mesh->ir_mesh().AxesSize(BatchSpec(*mesh)[0].names) != 0)
    Fail("--batch {} does not split evenly over the mesh's batch axes ({}): use a multiple of {}", o.batch,
         mesh->ToString(), mesh->ir_mesh().AxesSize(BatchSpec(*mesh)[0].names));
  if (!o.backend.empty()) set_backend(o.backend);
  manual_seed(o.seed);

  // The model.
  std::shared_ptr<nn::CausalLM> model;
  if (!o.init.empty()) {
    nn::LoadOptions load;
    load.dropout = o.dropout;     // GPT-2: --dropout decides, not the checkpoint's resid_pdrop
    load.convert_dtype = true;    // bf16 / f16 checkpoints train in f32 (the model's dtype)
    model = nn::LoadCausalLM(o.init, load);
    const bool llama_family = model->model_type() != "gpt2";
    if (o.model != "auto" && (o.model == "llama") != llama_family)
      Fail("--model {} but --init {} holds a {} model (config.json's model_type); pass --model auto or {}", o.model,
           o.init, model->model_type(), llama_family ? "llama" : "gpt2");
    if (llama_family && o.dropout > 0)
      Fail("--dropout {}: the Llama family has no residual dropout (its attention_dropout comes from config.json)",
           o.dropout);
  } else {
    // A run that resumes overwrites every parameter: skip drawing the random init (for GPT-2
    // 124M on the cpu backend, seconds of work and gigabytes of temporaries).
    bool resuming = false;
    if (o.resume && std::filesystem::is_directory(o.checkpoint_dir)) {
      checkpoint::ManagerOptions peek;
      peek.read_only = true;
      resuming = checkpoint::Manager(o.checkpoint_dir, peek).latest().has_value();
    }
    // Note [A model born sharded]: over a mesh, a resumed run's zeros, and the init of a process
    // that drives one device, stay pending until the parameters are marked (below); the step that
    // computes them (AdamW's) then runs partitioned, each device drawing only its runs of the
    // random stream (Note [Partitioned random bits], spmd/partitioner.cc), so no process holds
    // the model whole; the bits are the unsharded init's. A process of several devices draws its
    // random init whole once instead and the first step splits it: run as one partitioned program
    // on all its devices at once, the init's transients peaked at 16.6 GB for GPT-2 124M on 8
    // devices, against 8.1 GB this way. AdamW's moments are born sharded either way (they follow
    // their parameter's layout).
    const bool born_sharded = mesh && (resuming || flags::cpu_devices() == 1);
    if (o.model == "llama") {
      if (o.dropout > 0) Fail("--dropout {}: the Llama family has no residual dropout", o.dropout);
      model = std::make_shared<nn::Llama>(nn::LlamaConfig::Preset(o.config), o.seed, /*init=*/!resuming,
                                          /*materialize=*/!born_sharded);
    } else {
      nn::GPT2Config config = nn::GPT2Config::Preset(o.config);
      config.dropout = o.dropout;
      model = std::make_shared<nn::GPT2>(config, o.seed, /*init=*/!resuming, /*materialize=*/!born_sharded);
    }
  }
  model->set_remat(ParseRematPolicy(o.remat));  // --remat: each decoder block a remat region
  // --memory-budget: the compiled backend's remat pass (Note [Rematerialization under a budget]),
  // for this run's compilations only.
  struct BudgetScope {
    int64_t saved = flags::memory_budget();
    ~BudgetScope() { flags::set_memory_budget(saved); }
  } budget_scope;
  if (!o.memory_budget.empty()) flags::set_memory_budget(flags::ParseByteSize(o.memory_budget, "--memory-budget"));
  if (o.seq > model->max_positions())
    Fail("--seq {} is longer than the model's context ({} = {})", o.seq,
         model->model_type() == "gpt2" ? "n_positions" : "max_position_embeddings", model->max_positions());

  // The data.
  TokenData data;
  const bool instruct = o.data.size() >= 6 && o.data.substr(o.data.size() - 6) == ".jsonl";
  if (o.pack && !instruct) Fail("--pack packs instruction data: it needs --data FILE.jsonl");
  if (instruct) {
    data.source = o.data;
  } else if (o.data.empty()) {
    const std::string_view text = EmbeddedCorpus();
    data.tokens.assign(text.begin(), text.end());
    for (int32_t& t : data.tokens) t = static_cast<uint8_t>(t);
    data.vocab_hint = 256;
    data.source = "<embedded corpus>";
  } else {
    data = LoadTokens(o.data);
  }
  // Instruction data (FILE.jsonl): examples rendered with the chat template and tokenized with the
  // model's tokenizer, the loss on the responses (instruct.h).
  std::unique_ptr<BatchSource> source;
  std::string data_note;
  if (instruct) {
    std::unique_ptr<text::Tokenizer> tok = InstructionTokenizer(o);
    // The --init directory's chat template (tokenizer_config.json), unless --chat-template axle.
    ChatFormat format;
    if (!o.init.empty()) format = LoadChatFormat(o.init);
    if (o.chat_template == "axle") format.chat_template.reset();
    const std::vector<Example> examples = LoadInstructions(o.data, *tok, format);
    data.tokens.clear();
    for (const Example& ex : examples) data.tokens.insert(data.tokens.end(), ex.tokens.begin(), ex.tokens.end());
    CheckVocab(data.tokens, model->vocab_size(), data.source);
    auto il = std::make_unique<InstructionLoader>(examples, o.batch, o.seq, o.pack, 0, data.source);
    data_note = fmt::format("instruction data: {} examples in {} {} rows of {} tokens, {} of them trained ({}; "
                            "tokenizer {})\n",
                            examples.size(), il->rows(), o.pack ? "packed" : "padded", o.seq + 1, il->trained_tokens(),
                            format.chat_template ? "the chat template of " + o.init + "/tokenizer_config.json"
                                                 : std::string("Axle's chat template"),
                            tok->Describe());
    source = std::move(il);
  } else {
    CheckVocab(data.tokens, model->vocab_size(), data.source);
    source = std::make_unique<BatchLoader>(data.tokens, o.batch, o.seq, data.source);
  }
  const BatchSource& loader = *source;

  TrainResult result;
  // The optimizer: weight decay on matrices and embeddings, not on biases and norms.
  std::vector<Tensor> decay, no_decay, all;
  if (mesh) fsdp::shard(*model, *mesh, MeshLayout(*mesh));  // before AdamW's sync() makes the state
  // --precision bf16: the parameters (f32 init or checkpoint, rounded once) and so AdamW's moments
  // are bf16; the layouts just marked stay with them.
  if (o.precision == "bf16") model->to(DType::kBF16);
  for (const auto& [name, p] : model->named_parameters()) {
    (p.dim() >= 2 ? decay : no_decay).push_back(p);
    all.push_back(p);
  }
  optim::AdamW opt({{decay, o.weight_decay}, {no_decay, 0.0}}, o.lr, {0.9, 0.999}, 1e-8,
                   o.weight_decay);
  sync();  // the initial weights and the optimizer state are device data from here on
  // --mesh auto: from the first training step on, which lays the weights and state out as it
  // chooses (the init above ran whole, on one device).
  if (auto_mesh) {
    spmd::auto_shard(*auto_mesh, auto_options);
    detail::LastAutoShardReport().reset();  // an earlier run's in this process is not this one's
  }
  std::vector<Tensor> state;
  const auto& groups = opt.param_groups();
  for (size_t g = 0; g < groups.size(); ++g)
    for (size_t i = 0; i < groups[g].params.size(); ++i) {
      state.push_back(opt.exp_avg(g, i));
      state.push_back(opt.exp_avg_sq(g, i));
    }
  // Checkpoints: restore the newest committed step (--resume), and save as the run goes.
  std::unique_ptr<checkpoint::Manager> ckpt;
  int64_t first_step = 0;
  if (!o.checkpoint_dir.empty()) {
    checkpoint::ManagerOptions mo;
    mo.save_interval = o.checkpoint_every;
    mo.max_to_keep = o.keep;
    ckpt = std::make_unique<checkpoint::Manager>(o.checkpoint_dir, mo);
    const std::optional<int64_t> latest = o.resume ? ckpt->latest() : std::nullopt;
    if (o.resume && !latest) {
      out << fmt::format("--resume: no committed checkpoint in {} yet; starting at step 0\n", o.checkpoint_dir);
    } else if (latest) {
      const std::string where = ckpt->StepDir(*latest);
      const nlohmann::json extra = ckpt->read_extra(*latest);
      out << CheckResume(extra, o, *model, where);
      const uint64_t saved_seed = extra.value("rng", nlohmann::json::object()).value("seed", o.seed);
      if (saved_seed != rng_seed()) manual_seed(saved_seed);  // the generator continues as saved
      checkpoint::State resumed = TrainState(*model, opt);
      axle::wait();  // the step that made the state has run: the figures below are the restore's (zero pages
                     // that no one wrote yet count once the restore writes them)
      const int64_t rss_before = ProcStatusKb("VmRSS"), peak_before = ProcStatusKb("VmHWM");
      const Clock::time_point t0 = Clock::now();
      ckpt->restore(*latest, resumed);
      const double restore_s = Since(t0);
      const int64_t peak_after = ProcStatusKb("VmHWM");
      first_step = ApplyExtra(resumed.extra, opt, where);
      const checkpoint::RestoreStats& rs = ckpt->last_restore();
      out << fmt::format("resumed from {} (step {}) in {:.3f} s: {:.1f} MB read{} through a {:.1f} MB buffer, {} of "
                         "{} tensors in place, new blocks at most {:.1f} MB (the largest shard {:.1f} MB)",
                         where, first_step, restore_s, rs.bytes_read / 1e6, processes > 1 ? " by process 0" : "",
                         rs.staging_bytes / 1e6, rs.tensors_in_place, resumed.tensors.size(),
                         rs.new_block_bytes / 1e6, rs.largest_block_bytes / 1e6);
      if (rss_before >= 0 && peak_after >= 0)  // a new peak during the restore, or none
        out << fmt::format("; host memory {:.1f} MB before it, {}", rss_before / 1e3,
                           peak_after > peak_before ? fmt::format("peak {:.1f} MB during it", peak_after / 1e3)
                                                    : fmt::format("no new peak during it ({:.1f} MB before)",
                                                                  peak_before / 1e3));
      out << "\n";
    } else if (!ckpt->all_steps().empty()) {
      Fail("--checkpoint-dir {} already holds checkpoints (steps up to {}): pass --resume to continue that run, or "
           "choose an empty directory",
           o.checkpoint_dir, ckpt->all_steps().back());
    }
  }
  const int64_t last_step = o.stop_at > 0 ? std::min(o.stop_at, o.steps) : o.steps;  // exclusive
  result.first_step = first_step;
  const int64_t param_bytes = BytesPerDevice(all, mesh ? &*mesh : nullptr);
  const int64_t optimizer_bytes = BytesPerDevice(state, mesh ? &*mesh : nullptr);

  out << fmt::format("axle train: {} {} ({:.2f}M parameters), {} tokens from {}, batch {} x seq "
                     "{}, {} steps, backend {}{}\n",
                     model->model_type(), model->config_string(), model->num_parameters() / 1e6, data.tokens.size(),
                     data.source, o.batch, o.seq, o.steps, backend(),
                     (o.precision == "fp32" ? "" : ", precision " + o.precision) +
                         (o.remat == "none" ? "" : ", remat " + o.remat) +
                         (o.memory_budget.empty() ? "" : ", memory budget " + o.memory_budget));
  // The backend's own line (the CPU backends: which library runs products); a library its flags
  // ask for that is not installed fails here.
  if (const std::string d = runtime::GetBackend(backend()).Describe(); !d.empty()) out << d << "\n";
  if (!o.memory_budget.empty() && backend() != "compiled")
    Fail("--memory-budget {}: the {} backend runs no compiler pipeline; the budget needs --backend compiled (the "
         "default), or use --remat",
         o.memory_budget, backend());
  out << fmt::format("malloc: {}\n", Allocator());
  out << data_note;
  if (auto_mesh)
    out << fmt::format("mesh auto {} on {} virtual CPU devices: the compiler chooses the layouts at the first step\n",
                       auto_mesh->ToString(), auto_mesh->size());
  if (mesh)
    out << fmt::format("mesh {} on {} virtual CPU devices: {:.2f} MB of parameters and {:.2f} MB of optimizer "
                       "state per device\n",
                       mesh->ToString(), mesh->size(), param_bytes / 1e6, optimizer_bytes / 1e6);
  if (processes > 1) out << fmt::format("processes: {}\n", distributed::describe());
  std::ofstream json;
  if (!o.log_json.empty()) {
    // Rank 0 writes the file it is given; rank r of several writes NAME.rank<r>.EXT beside it.
    std::string path = o.log_json;
    if (rank > 0) {
      const std::filesystem::path p(o.log_json);
      path = (p.parent_path() / fmt::format("{}.rank{}{}", p.stem().string(), rank, p.extension().string())).string();
    }
    json.open(path);
    if (!json) Fail("--log-json {}: cannot open for writing", path);
  }
  const bool bar = o.progress && rank == 0 && isatty(STDERR_FILENO);

  const int64_t tokens_per_step = o.batch * o.seq;
  // A stop signal: with one process, as soon as it arrives; with several, once the step-time
  // exchange has told every process that one got it, so that all stop after the same step.
  StopSignals signals(ckpt != nullptr);
  int agreed_signal = 0, signal_process = 0;
  auto stop_signal = [&] { return processes > 1 ? agreed_signal : signals.signal(); };
  auto log = [&](StepLog s) {
    result.steps.push_back(s);
    // SPMD counters (zero on one device): this process's devices' collectives in the last step
    // that finished, bytes summed over its devices.
    const runtime::CollectiveStats c =
        mesh || auto_mesh ? detail::LastCollectiveStats() : runtime::CollectiveStats{};
    const double collective_s = c.seconds / static_cast<double>(flags::cpu_devices());
    // Several processes: every rank's step time, so that rank 0 can name the slowest.
    // The same exchange carries a stop signal that any process got (Note [Stopping on a signal]).
    std::vector<double> rank_step_s;
    if (processes > 1) {
      const double mine[3] = {s.step_s, collective_s, static_cast<double>(signals.signal())};
      const auto all = runtime::GetWorld()->AllGatherBytes(
          {reinterpret_cast<const uint8_t*>(mine), sizeof mine}, fmt::format("the times of step {}", s.step));
      for (size_t r = 0; r < all.size(); ++r) {
        double t[3];
        std::memcpy(t, all[r].data(), sizeof t);
        rank_step_s.push_back(t[0]);
        if (t[2] != 0 && agreed_signal == 0) {
          agreed_signal = static_cast<int>(t[2]);
          signal_process = static_cast<int>(r);
        }
      }
    }
    const size_t slowest =
        static_cast<size_t>(std::max_element(rank_step_s.begin(), rank_step_s.end()) - rank_step_s.begin());
    if (json.is_open()) {
      nlohmann::json j = {{"step", s.step},           {"loss", s.loss},
                          {"lr", s.lr},               {"tokens_per_s", s.tokens_per_s},
                          {"step_s", s.step_s},       {"compile_s", s.compile_s}};
      if (s.step == first_step) j["startup_s"] = result.startup_s;
      j["param_bytes_per_device"] = param_bytes;
      j["optimizer_bytes_per_device"] = optimizer_bytes;
      j["all_gather_bytes"] = c.all_gather_bytes;
      j["reduce_scatter_bytes"] = c.reduce_scatter_bytes;
      j["all_reduce_bytes"] = c.all_reduce_bytes;
      j["collectives"] = c.collectives;
      j["collective_s_per_device"] = collective_s;  // inside collective calls, waiting included
      if (processes > 1) {
        j["rank"] = rank;
        j["rank_step_s"] = rank_step_s;
        j["slowest_rank"] = slowest;
      }
      json << j.dump() << "\n" << std::flush;
    }
    if (s.step == first_step || s.step + 1 == last_step || (o.log_every > 0 && s.step % o.log_every == 0)) {
      if (bar) std::cerr << "\r" << std::string(70, ' ') << "\r";
      out << fmt::format("step {} | loss {:.6f} | lr {:.3e} | tok/s {:.0f}{}{}\n", s.step, s.loss,
                         s.lr, s.tokens_per_s,
                         s.compile_s > 0 ? fmt::format(" | compile {:.2f} s", s.compile_s) : "",
                         processes > 1 ? fmt::format(" | slowest rank {} ({:.3f} s)", slowest, rank_step_s[slowest])
                                       : "")
          << std::flush;
    }
    if (bar) PrintProgress(s.step + 1, last_step, s.loss, s.tokens_per_s);
  };

  // One training step: forward, backward, clipping, the update: a CompiledFunction, replayed
  // without tracing from its third call (Note [Replaying a step]; over a mesh too, Note
  // [Replaying a sharded step]); the gradients are dropped inside it, so nothing it made outlives
  // it but the loss.
  auto train_step = [&](const std::vector<Tensor>& batch) {
    opt.zero_grad();
    Tensor loss;
    {
      // --precision bf16-mixed: the forward under autocast; backward, clipping and AdamW in f32
      // on the f32 parameters (each cast's gradient is cast back). --precision bf16: the same
      // autocast (softmax, norms and the loss widened to f32) over bf16 parameters.
      std::optional<autocast> mixed;
      if (o.precision != "fp32") mixed.emplace(kBFloat16);
      loss = batch.size() == 4 ? model->loss_packed(batch[0], batch[1], batch[2], batch[3])
                               : model->forward(batch[0], batch[1]);
    }
    loss.backward();
    if (o.grad_clip > 0) optim::clip_grad_norm_(all, o.grad_clip);
    opt.step();
    opt.zero_grad();
    return std::vector<Tensor>{loss.detach()};
  };
  CompiledFunction compiled_step(train_step, "train_step");

  // Pipelined: step i is traced and launched before step i-1's loss is read, so tracing
  // overlaps execution. A step's time is measured from the previous step's completion.
  Tensor prev_loss;
  StepLog prev;
  Clock::time_point last_done = Clock::now();
  checkpoint::State ckpt_state;
  if (ckpt) ckpt_state = TrainState(*model, opt);
  // Saves the state after `done` steps: in the background (save_async) on the schedule, or forced
  // and waited for (the final save).
  auto save = [&](int64_t done, bool final) {
    if (!ckpt || done == result.last_checkpoint) return;
    if (!final && (o.checkpoint_every <= 0 || !ckpt->should_save(done))) return;
    ckpt_state.extra = TrainExtra(o, *model, opt, done, data.source, static_cast<int64_t>(data.tokens.size()));
    axle::wait();  // the step being saved has finished: what follows is the save's own time
    const Clock::time_point t0 = Clock::now();
    ckpt->save_async(done, ckpt_state, /*force=*/true);
    if (final) {
      ckpt->wait();
      result.final_save_s = Since(t0);
    } else {
      result.save_block_s.push_back(Since(t0));
    }
    result.last_checkpoint = done;
  };
  int64_t done = first_step;
  for (int64_t step = first_step; step < last_step; ++step) {
    const double lr = optim::lr_at(step, o.steps, o.lr, o.warmup, o.schedule);
    opt.set_lr(lr);
    const std::vector<Tensor> batch =
        mesh ? LoadShardedBatch(loader, step, *mesh) : BatchTensors(loader.Get(step), o.batch, o.seq);
    const double compile_before = metrics().compile_s;
    Tensor loss = compiled_step(batch)[0];
    const double compile_s = metrics().compile_s - compile_before;
    if (step == first_step) {
      result.startup_s = Since(start);
      const Metrics m = metrics();
      out << fmt::format("startup: {:.2f} s to the first step ({} compiled, {} from the disk cache, {} passes run)\n",
                         result.startup_s, m.compiles, m.disk_hits, m.passes_run);
      if (auto_mesh && detail::LastAutoShardReport()) {
        const spmd::AutoShardReport& a = *detail::LastAutoShardReport();
        const double mb = static_cast<double>(a.argument_bytes) / 1e6;
        if (a.chosen.empty())
          out << fmt::format("auto-sharding: the layouts an earlier run chose for this step (the disk cache), "
                             "{:.2f} MB of parameters, optimizer state and batch per device\n", mb);
        else
          out << fmt::format("auto-sharding: {} in {:.2f} s ({} nodes, {} decisions); chose the {} plan, modelled "
                             "{:.4f} s a step, {:.2f} MB of parameters, optimizer state and batch per device\n",
                             a.solver, a.total_s, a.nodes, a.variable_sets, a.chosen, a.evaluated_s, mb);
      } else if (auto_mesh) {
        out << "auto-sharding: the layouts an earlier run in this process chose (its compiled step)\n";
      }
    }
    if (prev_loss.defined()) {
      prev.loss = prev_loss.item();
      prev.step_s = Since(last_done);
      last_done = Clock::now();
      prev.tokens_per_s = tokens_per_step / prev.step_s;
      log(prev);
    }
    prev_loss = loss;
    prev = StepLog{step, 0, lr, 0, 0, compile_s};
    done = step + 1;
    if (stop_signal() != 0) break;
    if (done < last_step) save(done, false);
  }
  if (prev_loss.defined()) {
    prev.loss = prev_loss.item();
    prev.step_s = Since(last_done);
    prev.tokens_per_s = tokens_per_step / prev.step_s;
    log(prev);
  } else {
    out << fmt::format("nothing to train: the run is at step {} and ends at step {}\n", first_step, last_step);
  }
  if (bar) std::cerr << "\n";
  if (prev_loss.defined()) save(done, true);
  if (ckpt && result.last_checkpoint >= 0) {
    out << fmt::format("checkpoint: step {} committed in {}", result.last_checkpoint, o.checkpoint_dir);
    if (!result.save_block_s.empty()) {
      double sum = 0;
      for (double s : result.save_block_s) sum += s;
      // The max includes waiting for an earlier save still being written (ManagerOptions::max_pending).
      out << fmt::format("; {} background saves blocked the loop {:.3f} s each on average (min {:.3f}, max {:.3f})",
                         result.save_block_s.size(), sum / static_cast<double>(result.save_block_s.size()),
                         *std::min_element(result.save_block_s.begin(), result.save_block_s.end()),
                         *std::max_element(result.save_block_s.begin(), result.save_block_s.end()));
    }
    if (result.final_save_s > 0) out << fmt::format("; the final save took {:.3f} s to commit", result.final_save_s);
    out << "\n";
  }
  if (const int sig = stop_signal()) {
    result.stopped_by_signal = sig;
    out << fmt::format("stopped by {}{} after step {}; continue with --resume\n", SignalName(sig),
                       processes > 1 ? fmt::format(" (sent to process {})", signal_process) : "", done - 1)
        << std::flush;
    return result;
  }
  if (flags::replay() && !compiled_step.why_traced().empty())
    out << fmt::format("train_step was traced on every call: {}\n", compiled_step.why_traced());
  if (prev_loss.defined() && !std::isfinite(prev.loss))
    Fail("the loss became {} at step {}: lower --lr or set --grad-clip", prev.loss, prev.step);

  if (!o.save.empty()) {
    const std::string config_json = nn::SaveCausalLM(*model, o.save);
    out << fmt::format("saved the weights to {} (the model's config in its metadata and in {})\n", o.save,
                       config_json);
    // A model directory is whole with its tokenizer: copy the --init directory's tokenizer files
    // (and its generation defaults) beside the weights, so the result loads in transformers as is.
    namespace fs = std::filesystem;
    const fs::path to = fs::path(o.save).parent_path().empty() ? fs::path(".") : fs::path(o.save).parent_path();
    if (!o.init.empty() && fs::is_directory(o.init) && !fs::equivalent(o.init, to)) {
      std::vector<std::string> copied;
      for (const char* name : {"tokenizer.json", "tokenizer.model", "tokenizer_config.json", "special_tokens_map.json",
                               "generation_config.json"}) {
        if (!fs::exists(fs::path(o.init) / name)) continue;
        fs::copy_file(fs::path(o.init) / name, to / name, fs::copy_options::overwrite_existing);
        copied.push_back(name);
      }
      if (!copied.empty()) out << fmt::format("copied {} from {} to {}\n", fmt::join(copied, ", "), o.init, to.string());
    }
  }
  if (o.samples > 0) {
    // Prompt: the first line start of the data (a few tokens).
    std::vector<int32_t> prompt(data.tokens.begin(),
                                data.tokens.begin() + std::min<size_t>(4, data.tokens.size()));
    // Temperature 0.8 and top-k 40, the n samples as one batch with a KV cache (generate.h).
    GenerateOptions g;
    g.max_new_tokens = o.sample_tokens;
    g.sampling = {.temperature = 0.8, .top_k = 40, .top_p = 1};
    g.seed = o.seed;
    std::optional<autocast> mixed;  // bf16 weights: norms and softmax in f32, as in training
    if (o.precision == "bf16") mixed.emplace(kBFloat16);
    const GenerateResult generated =
        GenerateTokens(*model, std::vector<std::vector<int32_t>>(static_cast<size_t>(o.samples), prompt), g);
    // Text through the --init directory's tokenizer when it has one, else bytes or ids (Render).
    std::unique_ptr<text::Tokenizer> tok;
    if (!o.init.empty() && std::filesystem::is_directory(o.init) && text::FindTokenizerFile(o.init))
      tok = text::LoadTokenizer(o.init);
    for (const auto& tokens : generated.tokens) {
      std::vector<int32_t> text = prompt;
      text.insert(text.end(), tokens.begin(), tokens.end());
      result.samples.push_back(tok ? tok->Decode(text) : Render(text, model->vocab_size()));
    }
    out << "samples:\n";
    for (size_t i = 0; i < result.samples.size(); ++i)
      out << fmt::format("--- sample {} ---\n{}\n", i, result.samples[i]);
  }
  out << metrics_report();
  return result;
}

}  // namespace axle::train
