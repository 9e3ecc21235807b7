#include "runtime/base/suggest.hpp"

#include <gtest/gtest.h>

namespace troupe {
namespace {

TEST(NearestMatch, FindsTypos) {
  const std::vector<std::string> keys = {"count", "kind", "impl", "options", "on_failure"};
  EXPECT_EQ(nearest_match("cuont", keys), "count");
  EXPECT_EQ(nearest_match("optoins", keys), "options");
  EXPECT_EQ(nearest_match("on_failur", keys), "on_failure");
}

TEST(NearestMatch, IgnoresUnrelatedWords) {
  EXPECT_EQ(nearest_match("zzzzzzzz", {"count", "kind"}), std::nullopt);
  EXPECT_EQ(nearest_match("x", {}), std::nullopt);
}

TEST(SuggestionText, ListsCandidates) {
  EXPECT_EQ(suggestion_text("knd", {"count", "kind"}, "keys"),
            "Did you mean 'kind'? Valid keys: count, kind.");
  EXPECT_EQ(suggestion_text("zzzzzz", {"count"}, "keys"), "Valid keys: count.");
  EXPECT_EQ(suggestion_text("a", {}, "plugins"), "There are no valid plugins.");
}

}  // namespace
}  // namespace troupe
