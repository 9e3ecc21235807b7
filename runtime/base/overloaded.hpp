#pragma once

namespace troupe {

/// Lambdas as one visitor for std::visit: `std::visit(overloaded{[](int) {}, [](auto&) {}}, v)`.
template <class... F>
struct overloaded : F... {
  using F::operator()...;
};

}  // namespace troupe
