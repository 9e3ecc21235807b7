#include "apps/pipeline/pipeline_app.hpp"

#include "absl/strings/str_cat.h"
#include "apps/pipeline/pipeline_driver.hpp"
#include "apps/pipeline/pipeline_driver_actor.hpp"
#include "runtime/app/app_plan.hpp"
#include "runtime/base/suggest.hpp"

namespace troupe::apps {
namespace {

config::object_schema<pipeline_options> make_schema() {
  config::object_schema<pipeline_options> s;
  s.add("flow", &pipeline_options::flow)
      .required()
      .help("role names from source to sink: one source, any stages, one sink");
  s.add("max_in_flight", &pipeline_options::max_in_flight)
      .range(1, 1 << 20)
      .help("items between source and sink at once");
  s.add("batch", &pipeline_options::batch)
      .range(1, 1 << 16)
      .help("items asked of the source at once");
  s.add("item_timeout_ms", &pipeline_options::item_timeout_ms)
      .range(1, 3600000)
      .help("time one actor may take for one item");
  s.add("max_attempts", &pipeline_options::max_attempts)
      .range(1, 1000)
      .help("failed attempts of one item at one stage before the job fails");
  return s;
}

// The flow must be source, stage..., sink, naming every role exactly once.
void check_flow(const app::app_plan& plan, const void* opaque, const config::parse_context& ctx,
                const YAML::Node& section) {
  const auto& options = *static_cast<const pipeline_options*>(opaque);
  const config::parse_context flow_ctx = ctx.child("flow");
  const YAML::Node flow_node = section["flow"];
  std::vector<std::string> role_names;
  for (const auto& r : plan.roles)
    role_names.push_back(r.spec.name);
  if (options.flow.size() < 2) {
    flow_ctx.error(flow_node, "needs at least a source and a sink, e.g. [source, sink]");
    return;
  }
  for (size_t i = 0; i < options.flow.size(); ++i) {
    const std::string& name = options.flow[i];
    const auto* role = plan.find_role(name);
    const auto element_ctx = flow_ctx.element(i);
    const YAML::Node element = flow_node.IsSequence() ? flow_node[i] : flow_node;
    if (role == nullptr) {
      element_ctx.error(element, absl::StrCat("no role named '", name, "'. ",
                                              suggestion_text(name, role_names, "roles")));
      continue;
    }
    const std::string want = i == 0 ? "source" : i + 1 == options.flow.size() ? "sink" : "stage";
    if (role->spec.kind != want) {
      element_ctx.error(
          element, absl::StrCat("role '", name, "' has kind '", role->spec.kind, "', but position ",
                                i, " of the flow needs a ", want));
    }
    if ((want == "source" || want == "sink") && (role->spec.count != 1 || role->spec.elastic)) {
      element_ctx.error(
          element, absl::StrCat("the ", want, " role '", name, "' must have count 1, not ",
                                role->spec.elastic ? "elastic" : std::to_string(role->spec.count)));
    }
    if (std::count(options.flow.begin(), options.flow.end(), name) > 1) {
      element_ctx.error(element, absl::StrCat("role '", name, "' appears more than once"));
    }
  }
  for (const auto& name : role_names) {
    if (std::find(options.flow.begin(), options.flow.end(), name) == options.flow.end()) {
      flow_ctx.error(flow_node, absl::StrCat("role '", name,
                                             "' is not in the flow; add it or remove the role"));
    }
  }
}

}  // namespace

actor::role_factory pipeline_app_factory() {
  auto factory = actor::make_role_factory<pipeline_options>(
      "moves items from a source through stages into a sink", make_schema(),
      [](actor::role_context& ctx, const pipeline_options& options) {
        return spawn_pipeline_driver(ctx, options);
      });
  factory.check_plan = check_flow;
  return factory;
}

}  // namespace troupe::apps
