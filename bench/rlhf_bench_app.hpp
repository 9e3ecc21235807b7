#pragma once

namespace troupe::bench {

/// rlhf_bench's app part (bench/rlhf_bench_app.cpp): `steps` RL steps of each shipped config with
/// the engine alone after each launch, and PPO's step against PyTorch's, `repeats` times.
void run_rlhf_app_benchmarks(int steps, int repeats);

}  // namespace troupe::bench
