// trainer_options_of: how a trainer's defaults follow from the app's options and the cores it
// shares.

#include "apps/pretrain/pretrain_options.hpp"

#include <gtest/gtest.h>

namespace troupe::apps {
namespace {

// train.threads 0 divides the cores among the trainers that share them: a fixed grid's over this
// machine's, an elastic rank alone over its worker's (a joiner's on its own machine); a number
// set in the config wins. Overlap (auto) only when a core is left beyond the trainers' threads.
TEST(TrainerOptionsOf, ThreadsDivideTheCoresTheTrainersShare) {
  pretrain_options o;
  EXPECT_EQ(trainer_options_of(o, 4, 8).threads, 2);
  EXPECT_EQ(trainer_options_of(o, 1, 8).threads, 8);
  EXPECT_EQ(trainer_options_of(o, 3, 2).threads, 1);
  EXPECT_FALSE(trainer_options_of(o, 4, 8).overlap_comm);
  o.train.threads = 3;
  EXPECT_EQ(trainer_options_of(o, 1, 8).threads, 3);
  EXPECT_TRUE(trainer_options_of(o, 2, 8).overlap_comm);  // 2 x 3 of 8 cores
}

}  // namespace
}  // namespace troupe::apps
