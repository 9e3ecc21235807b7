// The pipeline schedules against their published tables for 4 stages and 8 micro-batches
// (Megatron-LM's 1F1B, Narayanan et al. 2021, figure 3; GPipe's, Huang et al. 2019), ZB-H1's
// rules (Qi et al. 2023, section 2.1), and their bubbles in a timeline with fixed costs.

#include "actors/pipeline_schedule.hpp"

#include <gtest/gtest.h>

namespace troupe::actors {
namespace {

using kind = pipeline_action::kind;

// A stage's schedule as text: F1 B1 ... (1-based micro-batches, as the papers' figures), with B
// for the input gradient and W for the weight gradient when the backward is split.
std::string text(const std::vector<pipeline_action>& actions) {
  std::string out;
  for (const auto& a : actions) {
    if (!out.empty()) out += ' ';
    out += a.op == kind::forward ? "F" : a.op == kind::backward_weight ? "W" : "B";
    out += std::to_string(a.micro_batch + 1);
  }
  return out;
}

TEST(PipelineSchedule, OneFOneBIsMegatronsTable) {
  const std::vector<std::string> want = {
      "F1 F2 F3 F4 B1 F5 B2 F6 B3 F7 B4 F8 B5 B6 B7 B8",
      "F1 F2 F3 B1 F4 B2 F5 B3 F6 B4 F7 B5 F8 B6 B7 B8",
      "F1 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 F8 B7 B8",
      "F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7 F8 B8",
  };
  for (int s = 0; s < 4; ++s)
    EXPECT_EQ(text(stage_schedule(pipeline_schedule_kind::one_f_one_b, 4, s, 8)), want[s]) << s;
  // Fewer micro-batches than the warm-up: every forward, then every backward.
  EXPECT_EQ(text(stage_schedule(pipeline_schedule_kind::one_f_one_b, 4, 0, 2)), "F1 F2 B1 B2");
}

TEST(PipelineSchedule, GpipeForwardsEverythingThenBackwards) {
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(text(stage_schedule(pipeline_schedule_kind::gpipe, 4, s, 8)),
              "F1 F2 F3 F4 F5 F6 F7 F8 B1 B2 B3 B4 B5 B6 B7 B8");
  }
}

// ZB-H1 keeps 1F1B's order of forwards and input gradients; stage s runs each weight gradient s
// backwards after its input gradient, so every stage holds p micro-batches at most, and the
// deferred weight gradients end the schedule.
TEST(PipelineSchedule, ZeroBubbleH1DefersEachStagesWeightGradients) {
  const std::vector<std::string> want = {
      "F1 F2 F3 F4 B1 W1 F5 B2 W2 F6 B3 W3 F7 B4 W4 F8 B5 W5 B6 W6 B7 W7 B8 W8",
      "F1 F2 F3 B1 F4 B2 W1 F5 B3 W2 F6 B4 W3 F7 B5 W4 F8 B6 W5 B7 W6 B8 W7 W8",
      "F1 F2 B1 F3 B2 F4 B3 W1 F5 B4 W2 F6 B5 W3 F7 B6 W4 F8 B7 W5 B8 W6 W7 W8",
      "F1 B1 F2 B2 F3 B3 F4 B4 W1 F5 B5 W2 F6 B6 W3 F7 B7 W4 F8 B8 W5 W6 W7 W8",
  };
  for (int s = 0; s < 4; ++s) {
    const auto zb = stage_schedule(pipeline_schedule_kind::zb1, 4, s, 8);
    EXPECT_EQ(text(zb), want[s]) << s;
    // Without the W passes it is 1F1B.
    std::vector<pipeline_action> f_and_b;
    for (const auto& a : zb) {
      if (a.op != kind::backward_weight) f_and_b.push_back(a);
    }
    EXPECT_EQ(text(f_and_b), text(stage_schedule(pipeline_schedule_kind::one_f_one_b, 4, s, 8)));
  }
}

// With a forward and a backward of fixed costs, 1F1B and GPipe idle (p - 1) / (m + p - 1) of
// the time, whatever the costs; 1F1B stashes at most p - s micro-batches on stage s, GPipe m.
TEST(PipelineSchedule, OneFOneBAndGpipeBubblesAreTheTheoreticalOnes) {
  for (auto schedule : {pipeline_schedule_kind::one_f_one_b, pipeline_schedule_kind::gpipe}) {
    for (const auto& [p, m] : {std::pair{4, 8}, {2, 4}, {4, 16}, {3, 7}}) {
      for (const pipeline_costs& c : {pipeline_costs{1, 2, 1, 1}, pipeline_costs{1, 1, 1, 1}}) {
        const auto t = simulate_pipeline(schedule, p, m, c);
        ASSERT_TRUE(t.ok()) << t.status();
        EXPECT_NEAR(t->bubble, theoretical_bubble(p, m), 1e-12)
            << to_string(schedule) << " p " << p << " m " << m;
        EXPECT_NEAR(ideal_bubble(schedule, p, m), theoretical_bubble(p, m), 1e-12);
        for (int s = 0; s < p; ++s) {
          EXPECT_EQ(t->peak_in_flight[s],
                    schedule == pipeline_schedule_kind::gpipe ? m : std::min(p - s, m));
        }
      }
    }
  }
}

// ZB-H1 with forward, input gradient and weight gradient of equal cost: a third of 1F1B's
// bubble time (the paper's (p - 1) / 3 units against p - 1), within 1F1B's memory (p
// micro-batches on every stage at most).
TEST(PipelineSchedule, ZeroBubbleH1HasAThirdOfTheBubbleInTheSameMemory) {
  for (const auto& [p, m] : {std::pair{4, 8}, {4, 16}, {2, 8}}) {
    const pipeline_costs unit{1, 2, 1, 1};
    const auto one = simulate_pipeline(pipeline_schedule_kind::one_f_one_b, p, m, unit);
    const auto zb = simulate_pipeline(pipeline_schedule_kind::zb1, p, m, unit);
    ASSERT_TRUE(one.ok() && zb.ok());
    const double one_idle = one->bubble * p * one->makespan;
    const double zb_idle = zb->bubble * p * zb->makespan;
    EXPECT_LT(zb->makespan, one->makespan) << "p " << p << " m " << m;
    EXPECT_NEAR(zb_idle / one_idle, 1.0 / 3.0, 0.02) << "p " << p << " m " << m;
    EXPECT_EQ(ideal_bubble(pipeline_schedule_kind::zb1, p, m), zb->bubble);
    for (int s = 0; s < p; ++s)
      EXPECT_LE(zb->peak_in_flight[s], p);
  }
}

TEST(PipelineSchedule, NamesParseAndOthersAreRefused) {
  EXPECT_EQ(*parse_pipeline_schedule("1f1b"), pipeline_schedule_kind::one_f_one_b);
  EXPECT_EQ(*parse_pipeline_schedule("gpipe"), pipeline_schedule_kind::gpipe);
  EXPECT_EQ(*parse_pipeline_schedule("zb1"), pipeline_schedule_kind::zb1);
  const auto bad = parse_pipeline_schedule("zb2");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("use gpipe, 1f1b or zb1"), std::string::npos);
}

}  // namespace
}  // namespace troupe::actors
