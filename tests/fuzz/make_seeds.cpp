// Writes the fuzz harnesses' seed corpora (tests/fuzz/corpus/<harness>/seed-*) with troupe's own
// encoders, the code that makes the real traffic: the frames a node sends its peers and the
// head, a checkpoint's files, shipped configs with a --set, and OpenAI requests as the clients
// send them. Run it again when a format changes:
//
//   build/tests/fuzz_make_seeds tests/fuzz/corpus

#include <filesystem>
#include <fstream>
#include <iostream>

#include "runtime/actor/messages.hpp"
#include "runtime/checkpoint/checkpoint_store.hpp"
#include "runtime/cluster/envelope.hpp"
#include "runtime/cluster/message_codec.hpp"
#include "runtime/tensor/safetensors.hpp"

namespace fs = std::filesystem;
using namespace troupe;

namespace {

void write(const fs::path& dir, const std::string& name, const std::string& bytes) {
  fs::create_directories(dir);
  std::ofstream(dir / ("seed-" + name), std::ios::binary) << bytes;
}

std::string file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

cluster::envelope header(const std::string& type, const std::string& dst = "", uint64_t corr = 0) {
  cluster::envelope h;
  h.type = type;
  h.src = "w1";
  h.dst = dst;
  h.corr = corr;
  h.epoch = 3;
  return h;
}

std::string actor_frame(const std::string& type, const std::string& dst, uint64_t corr,
                        const caf::message& content) {
  return cluster::encode(header(type, dst, corr), *cluster::encode_message(content));
}

void peer_frames(const fs::path& dir) {
  write(dir, "process",
        actor_frame("actor.req", "rot/0", 7,
                    caf::make_message(actor::process_atom_v, actor::work_item{3, "line 3"})));
  // Several envelopes in one frame, as a node batches one job's messages for a peer.
  write(dir, "batch",
        actor_frame("actor.send", "digest", 0,
                    caf::make_message(actor::source_batch{{{1, "x"}, {2, "y"}}, 10})) +
            actor_frame("actor.resp", "", 7,
                        caf::make_message(actor::sink_report{2, 5, "fnv1a64:00"})) +
            actor_frame("actor.send", "#12", 0,
                        caf::make_message(actor::actor_down{"rot/0", 13, "boom"})));
  write(dir, "tokens",
        actor_frame("actor.send", "router", 0,
                    caf::make_message(actor::token_batch{
                        2, 3, {1, 2, 3, 250, 0, 7}, {2, 3, 4, -1, 7, 9}, 40, 36, 11})));
}

void head_requests(const fs::path& dir) {
  using cluster::map_builder;
  const auto request = [](const std::string& type, const map_builder& payload) {
    return cluster::encode(header(type, "", 1), payload.bytes());
  };
  const std::string join = request(
      "join", map_builder()
                  .add("token", std::string("t"))
                  .add("endpoint", std::string("tcp://127.0.0.1:4100"))
                  .add("host", std::string("vm"))
                  .add("pid", int64_t{42})
                  .add("resources", std::map<std::string, uint64_t>{
                                        {"cores", 2}, {"memory_bytes", 1 << 30}, {"gpus", 0}}));
  write(dir, "join", join);
  write(dir, "member",
        join + request("heartbeat", map_builder()) +
            request("actors", map_builder().add("actors", std::vector<std::string>{"host/w1"})) +
            request("resolve", map_builder().add("name", std::string("host/w1"))) +
            request("leave", map_builder()));
  write(dir, "client",
        request("hello", map_builder()) +
            request("status", map_builder().add("token", std::string("t"))) +
            request("kv.set", map_builder()
                                  .add("token", std::string("t"))
                                  .add("key", std::string("world/0"))
                                  .add_bin("value", "addr")) +
            request("kv.wait", map_builder()
                                   .add("token", std::string("t"))
                                   .add("key", std::string("world/1"))
                                   .add("timeout_ms", uint64_t{100})) +
            request("metrics", map_builder().add("token", std::string("t"))));
}

void configs(const fs::path& dir, const fs::path& shipped) {
  for (const auto& entry : fs::recursive_directory_iterator(shipped)) {
    if (entry.path().extension() != ".yaml") continue;
    const std::string name = fs::relative(entry.path(), shipped).string();
    std::string flat = name;
    for (char& c : flat)
      if (c == '/') c = '_';
    write(dir, flat, "cluster.local_workers=2\n" + file_bytes(entry.path()));
  }
}

void checkpoint_files(const fs::path& safetensors_dir, const fs::path& manifest_dir) {
  const fs::path scratch = fs::temp_directory_path() / "troupe-fuzz-seeds";
  fs::remove_all(scratch);
  tensor::named_tensors file;
  file.metadata["step"] = "20";
  file.tensors.emplace_back("h.0.attn.c_attn.weight", tensor::tensor::host({2, 3}));
  file.tensors.emplace_back("h.0.attn.c_attn.bias", tensor::tensor::host({3}));
  checkpoint::checkpoint_store store(scratch.string());
  const fs::path staged = scratch / "model.safetensors";
  fs::create_directories(scratch);
  if (!tensor::write_safetensors(staged.string(), file).ok()) std::abort();
  write(safetensors_dir, "model", file_bytes(staged));
  auto record = store.stage(20, "model.safetensors", file);
  if (!record.ok() || !store.commit(20, {*record}, nlohmann::json{{"loss", 2.5}}, 1).ok()) {
    std::abort();
  }
  write(manifest_dir, "manifest", file_bytes(fs::path(store.step_dir(20)) / "manifest.json"));
  fs::remove_all(scratch);
}

void openai_requests(const fs::path& dir) {
  write(dir, "completion",
        R"({"model": "troupe-tiny", "prompt": "Hi", "max_tokens": 5, "temperature": 0.5,)"
        R"( "top_p": 0.9, "top_k": 20, "seed": 42, "stop": ["\n"], "stream": true, "n": 2})");
  write(dir, "chat",
        R"({"model": "troupe-tiny", "messages": [{"role": "system", "content": "Be brief."},)"
        R"( {"role": "user", "content": "Hello"}], "max_tokens": 4, "logprobs": true})");
  write(dir, "http_head",
        "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nAuthorization: Bearer s3cret\r\n"
        "Content-Type: application/json\r\nContent-Length: 41\r\n\r\n"
        R"({"model": "troupe-tiny", "prompt": "x"})");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: fuzz_make_seeds CORPUS_DIR CONFIGS_DIR\n";
    return 2;
  }
  const fs::path corpus = argv[1];
  peer_frames(corpus / "peer_frame");
  head_requests(corpus / "head_request");
  configs(corpus / "config", argv[2]);
  checkpoint_files(corpus / "safetensors", corpus / "manifest");
  openai_requests(corpus / "openai_request");
  return 0;
}
