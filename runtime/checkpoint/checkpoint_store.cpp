#include "runtime/checkpoint/checkpoint_store.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "runtime/base/status.hpp"

namespace troupe::checkpoint {
namespace fs = std::filesystem;
namespace {

constexpr const char* format = "troupe-checkpoint-1";

// fsync a file or directory, so a commit survives a power cut.
absl::Status sync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return absl::UnavailableError(absl::StrCat(path, ": cannot open to sync"));
  const int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return absl::DataLossError(absl::StrCat(path, ": fsync failed"));
  return absl::OkStatus();
}

// Removes a committed step directory so that no part of it stays visible: renamed (atomically)
// to a hidden name first, then deleted. A process killed while deleting leaves only the hidden
// directory, which the next commit removes.
void retire(const fs::path& root, const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return;
  const fs::path hidden =
      root / absl::StrCat(".retired-", dir.filename().string(), "-", ::getpid());
  fs::remove_all(hidden, ec);
  fs::rename(dir, hidden, ec);
  if (!ec) fs::remove_all(hidden, ec);
}

// What killed processes left: directories retire() did not finish deleting.
void remove_retired(const fs::path& root) {
  std::error_code ec;
  std::vector<fs::path> left;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    if (entry.path().filename().string().starts_with(".retired-")) left.push_back(entry.path());
  }
  for (const auto& dir : left)
    fs::remove_all(dir, ec);
}

}  // namespace

std::string checkpoint_root_of(const std::string& dir) {
  const fs::path nested = fs::path(dir) / "checkpoints";
  return fs::is_directory(nested) ? nested.string() : dir;
}

absl::StatusOr<std::string> sha256_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    EVP_DigestUpdate(ctx, buf.data(), static_cast<size_t>(in.gcount()));
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(ctx, digest, &length);
  EVP_MD_CTX_free(ctx);
  std::string hex;
  for (unsigned int i = 0; i < length; ++i)
    absl::StrAppend(&hex, absl::Hex(digest[i], absl::kZeroPad2));
  return hex;
}

std::string checkpoint_store::step_dir(int64_t step) const {
  return (fs::path(root_) / absl::StrCat("step-", step)).string();
}

std::string checkpoint_store::partial_dir(int64_t step) const {
  return (fs::path(root_) / absl::StrCat(".step-", step, ".partial")).string();
}

absl::StatusOr<file_record> checkpoint_store::stage(int64_t step, const std::string& name,
                                                    const tensor::named_tensors& contents) const {
  std::error_code ec;
  fs::create_directories(partial_dir(step), ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat(partial_dir(step), ": cannot create: ", ec.message()));
  }
  const std::string path = (fs::path(partial_dir(step)) / name).string();
  TROUPE_RETURN_IF_ERROR(tensor::write_safetensors(path, contents));
  TROUPE_RETURN_IF_ERROR(sync_path(path));
  file_record record{name, static_cast<uint64_t>(fs::file_size(path, ec)), ""};
  TROUPE_ASSIGN_OR_RETURN(record.sha256, sha256_file(path));
  return record;
}

absl::Status checkpoint_store::commit(int64_t step, const std::vector<file_record>& files,
                                      const nlohmann::json& meta, int keep) const {
  nlohmann::json manifest = {{"format", format}, {"step", step}, {"meta", meta}};
  manifest["files"] = nlohmann::json::object();
  for (const auto& f : files) {
    manifest["files"][f.name] = {{"bytes", f.bytes}, {"sha256", f.sha256}};
  }
  const std::string partial = partial_dir(step);
  const std::string manifest_path = (fs::path(partial) / "manifest.json").string();
  {
    std::ofstream out(manifest_path, std::ios::trunc);
    out << manifest.dump(2) << "\n";
    if (!out) return absl::DataLossError(absl::StrCat(manifest_path, ": write failed"));
  }
  TROUPE_RETURN_IF_ERROR(sync_path(manifest_path));
  TROUPE_RETURN_IF_ERROR(sync_path(partial));
  std::error_code ec;
  retire(root_, step_dir(step));  // a step written again (after a resume) replaces it
  fs::rename(partial, step_dir(step), ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("committing ", step_dir(step), ": rename failed: ", ec.message()));
  }
  TROUPE_RETURN_IF_ERROR(sync_path(root_));
  std::vector<int64_t> committed = steps();
  for (size_t i = 0; keep > 0 && i + keep < committed.size(); ++i)
    retire(root_, step_dir(committed[i]));
  remove_retired(root_);
  return absl::OkStatus();
}

std::vector<int64_t> checkpoint_store::steps() const {
  std::vector<int64_t> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root_, ec)) {
    const std::string name = entry.path().filename().string();
    int64_t step = 0;
    if (entry.is_directory() && name.starts_with("step-") &&
        absl::SimpleAtoi(name.substr(5), &step)) {
      out.push_back(step);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

absl::StatusOr<checkpoint> checkpoint_store::read(const std::string& dir) {
  const std::string manifest_path = (fs::path(dir) / "manifest.json").string();
  std::ifstream in(manifest_path);
  if (!in) {
    return absl::DataLossError(
        absl::StrCat(manifest_path, ": missing (the checkpoint was never committed)"));
  }
  // Every field is checked for its type before it is read: a manifest is outside input.
  nlohmann::json manifest = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (manifest.is_discarded() || !manifest.is_object() || !manifest.contains("format") ||
      manifest["format"] != format || !manifest.contains("step") ||
      !manifest["step"].is_number_integer() || !manifest.contains("files") ||
      !manifest["files"].is_object() ||
      (manifest.contains("meta") && !manifest["meta"].is_object() && !manifest["meta"].is_null())) {
    return absl::DataLossError(absl::StrCat(manifest_path, ": not a ", format, " manifest"));
  }
  checkpoint out;
  out.dir = dir;
  out.step = manifest["step"].get<int64_t>();
  out.meta = manifest.value("meta", nlohmann::json::object());
  for (const auto& [name, record] : manifest["files"].items()) {
    // A file of the step directory itself, with its size and digest.
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
        !record.is_object() || !record.contains("bytes") || !record["bytes"].is_number_unsigned() ||
        !record.contains("sha256") || !record["sha256"].is_string()) {
      return absl::DataLossError(absl::StrCat(manifest_path, ": malformed entry for file '", name,
                                              "' (a file name with its bytes and sha256)"));
    }
    const uint64_t bytes = record["bytes"].get<uint64_t>();
    const std::string path = (fs::path(dir) / name).string();
    std::error_code ec;
    const uint64_t size = fs::file_size(path, ec);
    if (ec) return absl::DataLossError(absl::StrCat(path, ": listed in the manifest but missing"));
    if (size != bytes) {
      return absl::DataLossError(
          absl::StrCat(path, ": ", size, " bytes, the manifest says ", bytes, " (truncated?)"));
    }
    TROUPE_ASSIGN_OR_RETURN(std::string digest, sha256_file(path));
    if (digest != record["sha256"].get<std::string>()) {
      return absl::DataLossError(
          absl::StrCat(path, ": sha256 differs from the manifest (the file is corrupted)"));
    }
    TROUPE_ASSIGN_OR_RETURN(out.files[name], tensor::read_safetensors(path));
  }
  return out;
}

absl::StatusOr<checkpoint> checkpoint_store::read_latest(std::vector<std::string>* warnings) const {
  const std::vector<int64_t> committed = steps();
  for (auto it = committed.rbegin(); it != committed.rend(); ++it) {
    absl::StatusOr<checkpoint> c = read(step_dir(*it));
    if (c.ok()) return c;
    if (warnings != nullptr) {
      warnings->push_back(
          absl::StrCat("skipping checkpoint step ", *it, ": ", c.status().message()));
    }
  }
  return absl::NotFoundError(absl::StrCat(root_, ": no readable checkpoint"));
}

}  // namespace troupe::checkpoint
