#include "actors/source_reader.hpp"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "caf/scoped_actor.hpp"
#include "runtime/actor/messages.hpp"
#include "runtime/actor/status_bridge.hpp"

namespace troupe::actors {
namespace {

constexpr uint32_t batch_records = 256;

}  // namespace

record_collector::record_collector(std::string source, uint64_t max_records)
    : source_(std::move(source)), max_records_(max_records) {}

uint32_t record_collector::ask() const {
  if (max_records_ == 0) return batch_records;
  return static_cast<uint32_t>(std::min<uint64_t>(batch_records, max_records_ - next()));
}

absl::StatusOr<bool> record_collector::take(actor::source_batch batch) {
  const uint64_t first = next();
  if (batch.items.size() > ask()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source_, " answered ", batch.items.size(), " records to a request for ", ask(),
                     " from record ", first, "; a source returns at most what is asked"));
  }
  for (size_t i = 0; i < batch.items.size(); ++i) {
    if (batch.items[i].seq != first + i) {
      return absl::InvalidArgumentError(absl::StrCat(
          source_, " answered record ", batch.items[i].seq, " where record ", first + i,
          " belongs; a source answers (next, first, max) with records first, first + 1, ..."));
    }
    records_.push_back(std::move(batch.items[i].payload));
  }
  return batch.items.empty() || (max_records_ != 0 && next() == max_records_);
}

absl::StatusOr<std::vector<std::string>> read_records(caf::actor_system& system,
                                                      const actor::source_actor& source,
                                                      const std::string& name, uint64_t max_records,
                                                      std::chrono::milliseconds timeout) {
  record_collector collector(name, max_records);
  caf::scoped_actor self{system};
  for (bool ended = false; !ended;) {
    absl::Status failed;
    const uint64_t first = collector.next();
    self->request(source, timeout, actor::next_atom_v, first, collector.ask())
        .receive(
            [&](actor::source_batch& batch) {
              auto taken = collector.take(std::move(batch));
              if (taken.ok())
                ended = *taken;
              else
                failed = taken.status();
            },
            [&](caf::error& e) {
              const absl::Status why = actor::to_status(e);
              failed = absl::Status(
                  why.code(),
                  absl::StrCat(name, " did not answer the request for records from ", first,
                               why.code() == absl::StatusCode::kDeadlineExceeded
                                   ? absl::StrCat(" within ", timeout.count(), " ms")
                                   : absl::StrCat(": ", why.message())));
            });
    TROUPE_RETURN_IF_ERROR(failed);
  }
  return std::move(collector.records());
}

}  // namespace troupe::actors
