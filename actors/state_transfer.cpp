#include "actors/state_transfer.hpp"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/base/even_split.hpp"

namespace troupe::actors {
namespace {

// A range of the flat buffer and the members that hold it; the first is the one it is taken
// from, unless the member that needs it holds it itself.
struct segment {
  int64_t begin, end;
  std::vector<std::pair<int, state_buffer>> holders;
};

// `total` split over the members in `holders`, each segment taken from another one of them.
std::vector<segment> spread(int64_t total, const std::vector<int>& holders, state_buffer buffer) {
  std::vector<segment> out;
  const even_split split{total, static_cast<int>(holders.size())};
  for (size_t k = 0; k < holders.size(); ++k) {
    segment s{split.begin(k), split.begin(k) + split.size(k), {}};
    for (size_t h = 0; h < holders.size(); ++h)
      s.holders.emplace_back(holders[(k + h) % holders.size()], buffer);
    if (s.begin < s.end) out.push_back(std::move(s));
  }
  return out;
}

// The pieces that fill member `to`'s `buffer` over `need` from `segments`.
void resolve(int to, state_buffer buffer, state_split::range need,
             const std::vector<segment>& segments, std::vector<state_piece>& out) {
  for (const segment& s : segments) {
    const int64_t lo = std::max(s.begin, need.begin), hi = std::min(s.end, need.end);
    if (lo >= hi) continue;
    auto from = s.holders.front();
    for (const auto& h : s.holders) {
      if (h.first == to) from = h;  // a copy within the rank beats a transfer
    }
    out.push_back({from.first, to, from.second, buffer, lo, hi});
  }
}

}  // namespace

state_split::range state_split::moments(int rank, int ranks) const {
  if (!sharded) return {0, total};
  const int64_t shard = (total + ranks - 1) / ranks;
  const int64_t begin = std::min(total, rank * shard);
  return {begin, std::min(total, begin + shard)};
}

state_split::range state_split::replica(int rank, int ranks) const {
  if (!sharded || !replicas || ranks < 2) return {0, 0};
  return moments((rank + 1) % ranks, ranks);
}

absl::StatusOr<std::vector<state_piece>> plan_state_transfer(
    const std::vector<member_state>& members, int basis_ranks, int64_t steps,
    const state_split& split) {
  const int m = static_cast<int>(members.size());
  std::vector<int> current;                    // members holding step `steps`
  std::vector<int> of_basis(basis_ranks, -1);  // basis rank -> member
  for (int j = 0; j < m; ++j) {
    const member_state& s = members[j];
    if (s.basis_rank < 0) continue;
    if (s.basis_rank >= basis_ranks || of_basis[s.basis_rank] >= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "regroup: member ", j, " claims rank ", s.basis_rank, " of a previous group of ",
          basis_ranks, ", which is out of range or claimed twice"));
    }
    if (s.steps > steps || (split.sharded && s.steps != steps)) {
      return absl::FailedPreconditionError(
          absl::StrCat("regroup: member ", j, " holds the state of step ", s.steps,
                       ", but the group continues from step ", steps,
                       split.sharded ? "; a ZeRO shard cannot be brought to another step"
                                     : "; roll its step back first"));
    }
    if (s.steps < steps) continue;  // behind (ZeRO 0): it takes everything, like a joiner
    of_basis[s.basis_rank] = j;
    current.push_back(j);
  }
  if (current.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("regroup: no member holds the state of step ", steps));
  }

  const std::vector<segment> params = spread(split.total, current, state_buffer::params);
  std::vector<segment> moments;
  if (!split.sharded) {
    moments = spread(split.total, current, state_buffer::moments);
  } else {
    for (int i = 0; i < basis_ranks; ++i) {
      const state_split::range r = split.moments(i, basis_ranks);
      if (r.begin >= r.end) continue;
      segment s{r.begin, r.end, {}};
      if (of_basis[i] >= 0) s.holders.emplace_back(of_basis[i], state_buffer::moments);
      const int keeper =
          split.replicas && basis_ranks > 1 ? of_basis[(i + basis_ranks - 1) % basis_ranks] : -1;
      if (keeper >= 0) s.holders.emplace_back(keeper, state_buffer::replica);
      if (s.holders.empty()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "regroup: the optimizer shard of rank ", i, " of the previous group (parameters [",
            r.begin, ", ", r.end, ")) was lost with it",
            split.replicas ? ", and so was the rank that kept its replica"
                           : " (parallel.shard_replicas: 1 keeps a copy on another rank)",
            "; the group restores its last checkpoint instead"));
      }
      moments.push_back(std::move(s));
    }
  }

  std::vector<state_piece> out;
  for (int j = 0; j < m; ++j) {
    resolve(j, state_buffer::params, {0, split.total}, params, out);
    resolve(j, state_buffer::moments, split.moments(j, m), moments, out);
    resolve(j, state_buffer::replica, split.replica(j, m), moments, out);
  }
  return out;
}

}  // namespace troupe::actors
