#pragma once

namespace troupe::bench {

/// rlhf_bench's app part (bench/rlhf_bench_app.cpp): `steps` RL steps of each shipped config.
void run_rlhf_app_benchmarks(int steps);

}  // namespace troupe::bench
