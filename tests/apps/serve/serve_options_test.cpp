#include "apps/serve/serve_options.hpp"

#include <thread>

#include <gtest/gtest.h>

#include "actors/inference_worker_actor.hpp"

namespace troupe::apps {
namespace {

// serve.engine.threads: 0 (the default) computes on the cores the worker offers (its `troupe
// worker --resources cores=N`, a launch's share of the machine), or the machine's when it says
// none; a number is that many.
TEST(ServeOptions, ZeroThreadsAreTheCoresTheWorkerOffers) {
  actors::served_model model;
  const models::decoder_config config;
  model.layout = std::make_unique<models::decoder_layout>(config, models::layer_range::all(config));
  serve_options options;
  options.engine.device = "cpu";
  ASSERT_EQ(options.engine.threads, 0);
  EXPECT_EQ(engine_options(model, options, 3).threads, 3);
  EXPECT_EQ(engine_options(model, options, 0).threads,
            static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  options.engine.threads = 2;
  EXPECT_EQ(engine_options(model, options, 3).threads, 2);
}

}  // namespace
}  // namespace troupe::apps
