// `mpiddp generate CKPT --prompt TEXT --tokens N [--temperature T --seed S]`:
// continues a prompt with a byte-level sequence model from a checkpoint, so a
// person can see what it learned. The model is rebuilt from the checkpoint's
// stored input file and loads its /params as model.init would. Causal attention
// lets one fixed-length window serve every step: the text so far (its last
// data.context bytes) fills the window's first positions, the rest are padding
// that no earlier position can see, and the next byte comes from the scores at
// the text's last position. Temperature 0 is greedy and deterministic; above 0
// a byte is drawn from softmax(scores / T) with a counter RNG of --seed.
#include <boost/program_options.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "io/hdf5_util.hpp"
#include "mpiddp/checkpoint/checkpoint.hpp"
#include "mpiddp/cli/commands.hpp"
#include "mpiddp/cli/options.hpp"
#include "mpiddp/common/error.hpp"
#include "mpiddp/common/random.hpp"
#include "mpiddp/config/config.hpp"
#include "mpiddp/nn/embedding.hpp"
#include "mpiddp/nn/model_builder.hpp"

namespace po = boost::program_options;

namespace mpiddp {
namespace {

constexpr std::size_t kBytes = 256;

std::string stored_input_file(const std::string& path) {
  h5::silence_errors();
  h5::Handle file = h5::open_read_only(path, path);
  if (!file) throw InputError(path + ": not a readable HDF5 file");
  h5::refuse_outside_storage(file.get(), path);
  if (!h5::has_attribute(file.get(), "config")) throw InputError(path + ": no stored input file (not an mpiddp checkpoint)");
  return h5::read_string_attribute(file.get(), "config", path);
}

// The next byte from the scores of one position.
int pick(const float* scores, double temperature, std::uint64_t seed, std::uint64_t step) {
  std::size_t best = 0;
  for (std::size_t k = 1; k < kBytes; ++k)
    if (scores[k] > scores[best]) best = k;
  if (temperature == 0.0) return static_cast<int>(best);
  std::vector<double> weights(kBytes);
  double total = 0.0;
  for (std::size_t k = 0; k < kBytes; ++k) total += weights[k] = std::exp((scores[k] - scores[best]) / temperature);
  double u = CounterRng(seed).uniform(step) * total;
  for (std::size_t k = 0; k < kBytes; ++k)
    if ((u -= weights[k]) < 0.0) return static_cast<int>(k);
  return static_cast<int>(best);
}

}  // namespace

int command_generate(const std::vector<std::string>& args) {
  std::string checkpoint, prompt;
  long tokens = 200;
  double temperature = 0.0;
  std::uint64_t seed = 1;
  std::string seed_text = "1";  // read as text: Boost takes "-1" as the largest seed, silently
  po::options_description options("mpiddp generate CHECKPOINT");
  options.add_options()("help,h", "show this help")
      ("checkpoint", po::value(&checkpoint), "a checkpoint of a byte-level sequence model (or the first argument)")
      ("prompt", po::value(&prompt)->required(), "the text to continue")
      ("tokens", po::value(&tokens)->default_value(tokens), "bytes to generate")
      ("temperature", po::value(&temperature)->default_value(temperature), "0: greedy; above 0: sample")
      ("seed", po::value(&seed_text)->default_value(seed_text), "the sampling stream (temperature above 0)");
  std::vector<std::string> rest = args;
  if (!rest.empty() && rest[0].rfind("-", 0) != 0) {  // the checkpoint as the first argument
    checkpoint = rest[0];
    rest.erase(rest.begin());
  }
  po::variables_map values;
  if (!parse_command_options(rest, options, values)) return kExitOk;
  if (checkpoint.empty()) throw InputError("generate needs a checkpoint: mpiddp generate CKPT --prompt TEXT");
  if (tokens < 1 || tokens > 1000000) throw InputError("--tokens must be in [1, 1000000]");
  if (!(temperature >= 0.0 && temperature <= 100.0)) throw InputError("--temperature must be in [0, 100]");
  if (prompt.empty()) throw InputError("--prompt must not be empty");
  if (const auto parsed = parse_whole_number(seed_text)) seed = *parsed;
  else throw InputError("--seed '" + seed_text + "' is not a whole number from 0 to 18446744073709551615");

  const Config config = load_config_text(stored_input_file(checkpoint), checkpoint + " (its stored input file)");
  const int context = config.data.context;
  if (context < 1) throw InputError(checkpoint + ": not a sequence model (its data.context is 0)");
  const std::size_t vocab = config.model.classes > 0 ? static_cast<std::size_t>(config.model.classes) : kBytes;
  if (vocab != kBytes)
    throw InputError(checkpoint + ": generate prints bytes, but the model's vocabulary is " + std::to_string(vocab));
  auto model = build_model(config.model, Shape{static_cast<std::size_t>(context)}, vocab, config.train.seed);
  // Token ids go to an embedding as the first layer, as training requires (one
  // inside a residual would make the model's output {256}, not {T, 256}). Every
  // byte value is a token id: the table needs a row for each.
  const auto* embedding = dynamic_cast<const Embedding*>(model->layers().front().get());
  if (!embedding)
    throw InputError(checkpoint + ": its first layer is " + model->layers().front()->kind() +
                     ", not the embedding a model of token ids starts with");
  if (embedding->entries() < kBytes)
    throw InputError(checkpoint + ": its embedding has " + std::to_string(embedding->entries()) +
                     " rows (num_embeddings), fewer than the 256 byte values generate feeds it");
  if (model->output_shape() != Shape{static_cast<std::size_t>(context), kBytes})
    throw InputError(checkpoint + ": its model gives " + std::to_string(element_count(model->output_shape())) +
                     " scores per window, not one row of 256 per position");
  read_initial_weights(checkpoint, model->parameters(), checkpoint);

  std::vector<int> text(prompt.begin(), prompt.end());
  for (int& b : text) b &= 0xff;
  Matrix window(1, static_cast<std::size_t>(context));
  ForwardContext ctx;
  ctx.training = false;
  std::fputs(prompt.c_str(), stdout);
  for (long step = 0; step < tokens; ++step) {
    const std::size_t used = std::min(text.size(), static_cast<std::size_t>(context));
    for (std::size_t j = 0; j < static_cast<std::size_t>(context); ++j) {
      const std::int32_t id = j < used ? text[text.size() - used + j] : 0;
      std::memcpy(window.data() + j, &id, sizeof(id));  // token ids travel as int32 bytes
    }
    const Matrix& scores = model->forward(window, ctx);
    const int next = pick(scores.data() + (used - 1) * kBytes, temperature, seed, static_cast<std::uint64_t>(step));
    text.push_back(next);
    std::fputc(next, stdout);
  }
  std::fputc('\n', stdout);
  return kExitOk;
}

}  // namespace mpiddp
