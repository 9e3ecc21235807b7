#include "runtime/app/app_plan.hpp"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "apps/builtin_apps.hpp"
#include "tests/support/temp_dir.hpp"

namespace troupe::app {
namespace {

class AppPlanTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(apps::register_builtins(registry_).ok()); }

  absl::StatusOr<app_plan> load(const std::string& yaml, std::vector<std::string> sets = {}) {
    return load_app_plan({dir_.write("app.yaml", yaml), std::move(sets)}, registry_, plugins_);
  }

  // The errors of loading `yaml`, with the temp path shortened to "app.yaml".
  std::string errors(const std::string& yaml, std::vector<std::string> sets = {}) {
    auto plan = load(yaml, std::move(sets));
    if (plan.ok()) return "";
    std::string msg(plan.status().message());
    const std::string path = dir_.file("app.yaml");
    for (size_t at; (at = msg.find(path)) != std::string::npos;)
      msg.replace(at, path.size(), "app.yaml");
    return msg;
  }

  std::string source_yaml() {
    return "    kind: source\n    impl: text\n    options: {path: " +
           dir_.write("in.txt", "a\n%\nb\n") + "}\n";
  }

  testing::temp_dir dir_;
  actor::role_registry registry_;
  plugin::plugin_loader plugins_{{TROUPE_PLUGIN_DIR, TROUPE_TEST_PLUGIN_DIR}};
};

TEST_F(AppPlanTest, EveryShippedConfigLoads) {
  int count = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(TROUPE_SOURCE_DIR) + "/configs")) {
    if (entry.path().extension() != ".yaml") continue;
    ++count;
    actor::role_registry registry;
    ASSERT_TRUE(apps::register_builtins(registry).ok());
    plugin::plugin_loader plugins({TROUPE_PLUGIN_DIR});
    auto plan = load_app_plan({entry.path().string(), {}}, registry, plugins);
    EXPECT_TRUE(plan.ok()) << entry.path() << ": " << plan.status();
  }
  EXPECT_GE(count, 2);
}

TEST_F(AppPlanTest, ResolvesRolesFromPluginsAndBuiltIns) {
  auto plan = load("app: pipeline\nroles:\n  src:\n" + source_yaml() +
                   "  rot: {kind: stage, impl: caesar, plugin: example, count: 3}\n"
                   "  out: {kind: sink, impl: digest}\n"
                   "pipeline: {flow: [src, rot, out]}\n");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->actor_count(), 5);
  EXPECT_EQ(plan->find_role("rot")->entry->kind, "stage");
  // Defaults are filled in: restart for the stage, fail_job for the sink that cannot restart.
  EXPECT_EQ(plan->find_role("rot")->on_failure.on_failure, config::failure_policy::action::restart);
  EXPECT_EQ(plan->find_role("out")->on_failure.on_failure,
            config::failure_policy::action::fail_job);
  const std::string yaml = plan->resolved_yaml();
  EXPECT_NE(yaml.find("shift: 13"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("max_in_flight: 256"), std::string::npos) << yaml;
}

TEST_F(AppPlanTest, ResolvedConfigLoadsToTheSameConfig) {
  // An elastic role too: its resolved form is elastic, not the count it starts with.
  auto plan =
      load("app: pipeline\nroles:\n  src:\n" + source_yaml() +
           "  rot: {kind: stage, impl: caesar, plugin: example, elastic: {min: 2, max: 4}}\n"
           "  out: {kind: sink, impl: digest}\npipeline: {flow: [src, rot, out]}\n");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->actor_count(), 4);  // the source, the elastic stage's min, the sink
  auto again = load(plan->resolved_yaml());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->resolved_yaml(), plan->resolved_yaml());
  // A pipeline's source and sink are one actor each, never elastic.
  auto elastic_sink = load("app: pipeline\nroles:\n  src:\n" + source_yaml() +
                           "  out: {kind: sink, impl: digest, elastic: {min: 1, max: 2}}\n"
                           "pipeline: {flow: [src, out]}\n");
  EXPECT_NE(elastic_sink.status().message().find("the sink role 'out' must have count 1, not "
                                                 "elastic"),
            std::string::npos)
      << elastic_sink.status();
}

TEST_F(AppPlanTest, SetOverridesAreAppliedAndValidated) {
  const std::string yaml = "app: pipeline\nroles:\n  src:\n" + source_yaml() +
                           "  rot: {kind: stage, impl: caesar, plugin: example}\n"
                           "  out: {kind: sink, impl: digest}\n"
                           "pipeline: {flow: [src, rot, out]}\n";
  auto plan = load(yaml, {"roles.rot.count=4", "roles.rot.options.shift=3"});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->find_role("rot")->spec.count, 4);
  EXPECT_NE(plan->resolved_yaml().find("shift: 3"), std::string::npos);

  EXPECT_EQ(errors(yaml, {"roles.rot.count=lots"}),
            "--set roles.rot.count=lots: roles.rot.count: expected an integer, got 'lots'");
  EXPECT_EQ(errors(yaml, {"roles.rot.options.shift=30"}),
            "--set roles.rot.options.shift=30: roles.rot.options.shift: must be between 1 and 25, "
            "got 30");
  EXPECT_EQ(
      errors(yaml, {"roles.rot.cuont=2"}),
      "--set roles.rot.cuont=2: roles.rot.cuont: unknown key 'cuont'. Did you mean 'count'? "
      "Valid keys here: kind, impl, plugin, count, elastic, autoscale, placement, on_failure, "
      "options.");
  EXPECT_EQ(errors(yaml, {"roles.rot"}),
            "--set roles.rot: expected key.path=value, for example --set roles.sink.count=2");
}

TEST_F(AppPlanTest, UnknownImplementationListsAvailableOnes) {
  EXPECT_EQ(errors("app: pipeline\nroles:\n  src:\n    kind: source\n    impl: txt\n"),
            "app.yaml:5:11: roles.src.impl: kind 'source' has no implementation 'txt'. Did you "
            "mean 'text'? Valid implementations: text. Implementations from plugins appear once "
            "the role names its plugin.");
  EXPECT_EQ(errors("app: pipeline\nroles:\n  src: {kind: sorce, impl: text}\n"),
            "app.yaml:3:28: roles.src.impl: there is no role kind 'sorce'. Did you mean "
            "'source'? Valid kinds: app, inference_worker, reward, sink, source, trainer.");
}

TEST_F(AppPlanTest, UnknownPluginListsAvailableOnes) {
  const std::string msg =
      errors("app: pipeline\nroles:\n  r: {kind: stage, impl: caesar, plugin: exampel}\n");
  EXPECT_TRUE(absl::StartsWith(msg, "app.yaml:3:42: roles.r.plugin: no plugin 'exampel'")) << msg;
  EXPECT_NE(msg.find("Did you mean 'example'?"), std::string::npos) << msg;
  EXPECT_NE(
      msg.find("Valid plugins: abi_mismatch, example, faulty, reward_example, size_mismatch."),
      std::string::npos)
      << msg;
}

TEST_F(AppPlanTest, MismatchedPluginIsRefusedAtTheRoleThatNamesIt) {
  const std::string msg =
      errors("app: pipeline\nroles:\n  r: {kind: stage, impl: x, plugin: abi_mismatch}\n");
  EXPECT_TRUE(absl::StartsWith(msg, "app.yaml:3:37: roles.r.plugin: ")) << msg;
  EXPECT_NE(msg.find("plugin ABI mismatch"), std::string::npos) << msg;
}

TEST_F(AppPlanTest, UnknownAppListsAvailableOnes) {
  EXPECT_EQ(
      errors("app: pipelin\n"),
      "app.yaml:1:6: app: unknown app. kind 'app' has no implementation 'pipelin'. Did you "
      "mean 'pipeline'? Valid implementations: dpo, pipeline, pretrain, reward_model, rlhf, serve. "
      "Implementations "
      "from "
      "plugins "
      "appear once the role names its plugin.");
}

TEST_F(AppPlanTest, RoleOptionsAreValidatedBySchemaOfTheImplementation) {
  EXPECT_EQ(errors("app: pipeline\nroles:\n  r: {kind: stage, impl: caesar, plugin: example, "
                   "options: {shift: 0, bogus: 1}}\n"),
            "app.yaml:3:68: roles.r.options.shift: must be between 1 and 25, got 0\n"
            "app.yaml:3:71: roles.r.options.bogus: unknown key 'bogus'. Valid keys here: shift.");
  EXPECT_EQ(errors("app: pipeline\nroles:\n  s: {kind: source, impl: text, options: {path: "
                   "/no/such/file}}\n"),
            "app.yaml:3:49: roles.s.options.path: no such file or directory: /no/such/file");
  EXPECT_EQ(errors("app: pipeline\nroles:\n  s: {kind: source, impl: text}\n"),
            "app.yaml:3:6: roles.s.options: missing required key 'path'");
}

TEST_F(AppPlanTest, StatefulSinkCannotBeRestarted) {
  EXPECT_EQ(errors("app: pipeline\nroles:\n  out: {kind: sink, impl: digest, on_failure: "
                   "{restart: {max: 1}}}\n"),
            "app.yaml:3:47: roles.out.on_failure: sink/digest keeps state that a restart would "
            "lose, so it cannot be restarted; use on_failure: fail_job");
}

TEST_F(AppPlanTest, RoleNamesAreChecked) {
  EXPECT_EQ(errors("app: pipeline\nroles:\n  app: {kind: sink, impl: digest}\n"),
            "app.yaml:3:8: roles.app: the role name 'app' is reserved for the app driver; pick "
            "another name");
  EXPECT_EQ(errors("app: pipeline\nroles:\n  Big: {kind: sink, impl: digest}\n"),
            "app.yaml:3:8: roles.Big: role name: 'Big' is not a valid name: use lowercase "
            "letters, digits and '_', starting with a letter");
}

TEST_F(AppPlanTest, PipelineFlowIsChecked) {
  const std::string roles = "app: pipeline\nroles:\n  src:\n" + source_yaml() +
                            "  rot: {kind: stage, impl: caesar, plugin: example}\n"
                            "  out: {kind: sink, impl: digest}\n";
  EXPECT_EQ(errors(roles + "pipeline: {flow: [src, rto, out]}\n"),
            "app.yaml:9:24: pipeline.flow[1]: no role named 'rto'. Did you mean 'rot'? Valid "
            "roles: src, rot, out.\n"
            "app.yaml:9:18: pipeline.flow: role 'rot' is not in the flow; add it or remove the "
            "role");
  EXPECT_EQ(errors(roles + "pipeline: {flow: [rot, src, out]}\n"),
            "app.yaml:9:19: pipeline.flow[0]: role 'rot' has kind 'stage', but position 0 of the "
            "flow needs a source\n"
            "app.yaml:9:24: pipeline.flow[1]: role 'src' has kind 'source', but position 1 of the "
            "flow needs a stage");
  EXPECT_EQ(errors(roles + "pipeline: {}\n"),
            "app.yaml:9:11: pipeline: missing required key 'flow'");
}

// pretrain.data.source names a role of kind source, whose instances the trainer ranks spawn
// themselves: the supervisor starts none, and the text comes from it alone.
TEST_F(AppPlanTest, PretrainDataSourceIsChecked) {
  const std::string head =
      "app: pretrain\n"
      "model: {vocab: 256, ctx: 32, layers: 2, dim: 32, heads: 2}\n"
      "roles:\n"
      "  trainer: {kind: trainer, impl: gpt, count: 2}\n"
      "  corpus:\n" +
      source_yaml();
  const std::string tail = "pretrain:\n  parallel: {dp: 2}\n  data: {source: corpus}\n";
  auto plan = load(head + tail);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->find_role("corpus")->embedded);
  EXPECT_FALSE(plan->find_role("trainer")->embedded);
  EXPECT_EQ(plan->actor_count(), 2);  // the trainers; each spawns its own corpus instance

  EXPECT_EQ(errors(head + tail, {"pretrain.data.source=corp"}),
            "--set pretrain.data.source=corp: pretrain.data.source: names no role 'corp'; add "
            "roles.corp: {kind: source, impl: ...} (a plugin's, or text), or use data.path\n"
            "app.yaml:10:3: pretrain: app: pretrain runs only the 'trainer' role (and the role "
            "data.source names); remove role 'corpus'");
  EXPECT_TRUE(absl::StartsWith(errors(head + tail, {"pretrain.data.source=trainer"}),
                               "--set pretrain.data.source=trainer: pretrain.data.source: names "
                               "role 'trainer' of kind trainer; it must be of kind source\n"));
  EXPECT_EQ(errors(head + tail, {"roles.corpus.count=2"}),
            "app.yaml:11:18: pretrain.data.source: names role 'corpus', which has a count or "
            "elastic: each trainer rank reads an instance of it in its own process; remove them "
            "from roles.corpus");
  EXPECT_EQ(errors(head + tail, {"pretrain.data.format=sft", "pretrain.data.path=/tmp"}),
            "--set pretrain.data.format=sft: pretrain.data.format: is sft, but data.source gives "
            "text (its records joined by newlines): use format text, or data.path for JSONL "
            "files\n"
            "--set pretrain.data.path=/tmp: pretrain.data.path: is set, and so is data.source: "
            "the text comes from one of them; remove one");
  // Without data.source, a second role is refused as before.
  EXPECT_EQ(errors(head + "pretrain:\n  parallel: {dp: 2}\n"),
            "app.yaml:10:3: pretrain: app: pretrain runs only the 'trainer' role (and the role "
            "data.source names); remove role 'corpus'");
}

TEST_F(AppPlanTest, AMissingAppSectionIsReportedNotThrown) {
  EXPECT_EQ(errors("app: pipeline\nroles:\n  out: {kind: sink, impl: digest}\n"),
            "app.yaml:1:1: pipeline: missing required key 'flow'");
}

TEST_F(AppPlanTest, AutoscaleIsCheckedAtItsKey) {
  const std::string serve = "app: serve\nserve: {}\n";
  const std::string worker = "  worker:\n    kind: inference_worker\n    impl: gpt\n";
  // Valid: local workers to start, and the role's bounds come from autoscale.
  auto plan = load(serve + "cluster: {local_workers: 1}\nroles:\n" + worker +
                   "    autoscale: {min: 1, max: 3, target_ongoing_requests: 1}\n");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->roles[0].spec.elastic_bounds()->max, 3);
  EXPECT_EQ(plan->actor_count(), 1);
  EXPECT_EQ(errors(serve + "roles:\n" + worker + "    autoscale: {min: 1, max: 3}\n"),
            "app.yaml:7:16: roles.worker.autoscale: autoscaling starts and stops worker processes: "
            "set cluster.local_workers (workers on this machine) or cluster.scale_command (e.g. an "
            "sbatch or a kubectl scale)");
  EXPECT_EQ(errors(serve + "cluster: {local_workers: 1}\nroles:\n" + worker +
                   "    elastic: {min: 1, max: 2}\n    autoscale: {min: 1, max: 3}\n"),
            "app.yaml:9:16: roles.worker.autoscale: set autoscale alone, without elastic: "
            "autoscale's min and max bound the role, one actor per worker");
  EXPECT_EQ(errors(serve + "cluster: {local_workers: 1}\nroles:\n" + worker +
                   "    autoscale: {min: 4, max: 3}\n"),
            "app.yaml:8:16: roles.worker.autoscale: min 4 is larger than max 3");
  EXPECT_EQ(errors(serve + "cluster: {scale_command: 'true'}\nroles:\n" + worker),
            "app.yaml:3:26: cluster.scale_command: a scale command is for a role with autoscale "
            "(app: serve's roles.worker.autoscale); remove it, or add autoscale");
  // Only an app that scales by load takes it.
  EXPECT_EQ(errors("app: pipeline\ncluster: {local_workers: 1}\nroles:\n  src:\n" + source_yaml() +
                   "  rot: {kind: stage, impl: caesar, plugin: example, autoscale: {max: 2}}\n"
                   "  out: {kind: sink, impl: digest}\npipeline: {flow: [src, rot, out]}\n"),
            "app.yaml:8:64: roles.rot.autoscale: app: pipeline does not scale its workers by load "
            "(app: serve does); use elastic: {min, max} for a role that grows as workers join");
}

// docs/config.md stays true to the schemas: every key they accept is documented.
TEST_F(AppPlanTest, ConfigReferenceDocumentsEveryKey) {
  std::ifstream in(std::string(TROUPE_SOURCE_DIR) + "/docs/config.md");
  const std::string doc((std::istreambuf_iterator<char>(in)), {});
  ASSERT_FALSE(doc.empty());
  std::vector<config::field_info> fields = config::app_spec_schema().describe();
  for (const auto& f : config::role_spec_schema().describe())
    fields.push_back(f);
  for (const auto* entry : registry_.entries()) {
    for (const auto& f : entry->factory.options->describe())
      fields.push_back(f);
  }
  for (const auto& f : fields) {
    EXPECT_NE(doc.find("| `" + f.key + "` |"), std::string::npos) << f.key << " is not documented";
  }
}

}  // namespace
}  // namespace troupe::app
