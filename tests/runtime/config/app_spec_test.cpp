#include "runtime/config/app_spec.hpp"

#include <gtest/gtest.h>

#include "runtime/config/document.hpp"

namespace troupe::config {
namespace {

struct parsed {
  app_spec spec;
  std::string errors;
};

parsed parse(const std::string& yaml) {
  auto doc = document::load_string(yaml, "a.yaml");
  EXPECT_TRUE(doc.ok()) << doc.status();
  diagnostics diag;
  parsed p;
  app_spec_schema().parse(doc->root(), parse_context(*doc, diag), p.spec);
  p.errors = std::string(diag.status().message());
  return p;
}

TEST(AppSpec, ParsesRolesInDocumentOrder) {
  auto p = parse(
      "app: pipeline\n"
      "roles:\n"
      "  zeta: {kind: source, impl: text, options: {path: x}}\n"
      "  alpha: {impl: caesar, plugin: example, count: 2}\n"
      "pipeline: {flow: [zeta, alpha]}\n");
  ASSERT_EQ(p.errors, "");
  ASSERT_EQ(p.spec.roles.size(), 2u);
  EXPECT_EQ(p.spec.roles[0].name, "zeta");
  EXPECT_EQ(p.spec.roles[1].name, "alpha");
  EXPECT_EQ(p.spec.roles[1].count, 2);
  EXPECT_EQ(p.spec.roles[1].kind, "");  // defaults to the name once resolved
  EXPECT_TRUE(p.spec.roles[0].options.node["path"].IsDefined());
  EXPECT_TRUE(p.spec.app_section.node["flow"].IsDefined());
}

TEST(AppSpec, FailurePolicies) {
  auto p = parse(
      "app: x\nroles:\n"
      "  a: {impl: i, on_failure: fail_job}\n"
      "  b: {impl: i, on_failure: {restart: {max: 5, backoff_ms: 20}}}\n"
      "  c: {impl: i}\n");
  ASSERT_EQ(p.errors, "");
  EXPECT_EQ(p.spec.roles[0].on_failure->on_failure, failure_policy::action::fail_job);
  EXPECT_EQ(p.spec.roles[1].on_failure->on_failure, failure_policy::action::restart);
  EXPECT_EQ(p.spec.roles[1].on_failure->restart.max, 5);
  EXPECT_EQ(p.spec.roles[1].on_failure->restart.backoff_ms, 20);
  EXPECT_FALSE(p.spec.roles[2].on_failure.has_value());
}

TEST(AppSpec, BadFailurePolicies) {
  EXPECT_EQ(parse("app: x\nroles:\n  a: {impl: i, on_failure: retry}\n").errors,
            "a.yaml:3:28: roles.a.on_failure: expected fail_job or {restart: {max: N, "
            "backoff_ms: M}}, got 'retry'");
  EXPECT_EQ(parse("app: x\nroles:\n  a: {impl: i, on_failure: {restart: {max: -1}}}\n").errors,
            "a.yaml:3:44: roles.a.on_failure.restart.max: must be between 0 and 1000, got -1");
}

TEST(AppSpec, TopLevelErrors) {
  EXPECT_EQ(parse("roles: {}\n").errors, "a.yaml:1:1: missing required key 'app'");
  EXPECT_EQ(parse("app: x\nruntme: {}\n").errors,
            "a.yaml:2:1: runtme: unknown key 'runtme'. Did you mean 'runtime'? Valid keys here: "
            "app, cluster, model, runtime, plugins, health, roles, x.");
  EXPECT_EQ(parse("app: Bad-Name\n").errors,
            "a.yaml:1:6: app: 'Bad-Name' is not a valid name: use lowercase letters, digits and "
            "'_', starting with a letter");
  EXPECT_EQ(parse("app: x\nruntime: {scheduler_policy: random}\n").errors,
            "a.yaml:2:29: runtime.scheduler_policy: 'random' is not allowed. Valid values: "
            "stealing, sharing.");
}

TEST(AppSpec, ModelIsOptionalAndCheckedAcrossFields) {
  auto p = parse("app: x\n");
  ASSERT_EQ(p.errors, "");
  EXPECT_FALSE(p.spec.model.has_value());
  p = parse("app: x\nmodel: {layers: 2}\n");
  ASSERT_EQ(p.errors, "");
  EXPECT_EQ(p.spec.model->layers, 2);
  EXPECT_FALSE(p.spec.model->dim.has_value());  // the tiny GPT's (models::decoder_config_of)
  EXPECT_EQ(parse("app: x\nmodel: {dim: 130, heads: 4}\n").errors,
            "a.yaml:2:8: model: dim 130 is not divisible by heads 4");
  // A Hugging Face directory gives the shape; only the context may be set beside it.
  p = parse("app: x\nmodel: {path: /m, ctx: 64}\n");
  ASSERT_EQ(p.errors, "");
  EXPECT_EQ(p.spec.model->path, "/m");
  EXPECT_EQ(p.spec.model->ctx, 64);
  EXPECT_EQ(parse("app: x\nmodel: {path: /m, layers: 2}\n").errors,
            "a.yaml:2:8: model: model.layers cannot be set with model.path: the model's "
            "config.json gives its shape; remove layers");
  // The Llama family's keys belong to it.
  p = parse("app: x\nmodel: {arch: qwen3, kv_heads: 2, ffn: 96}\n");
  ASSERT_EQ(p.errors, "");
  EXPECT_EQ(p.spec.model->arch, "qwen3");
  EXPECT_EQ(p.spec.model->kv_heads, 2);
  EXPECT_EQ(parse("app: x\nmodel: {kv_heads: 2}\n").errors,
            "a.yaml:2:8: model: model.kv_heads belongs to model.arch llama or qwen3, not gpt2; "
            "set model.arch or remove kv_heads");
  EXPECT_EQ(parse("app: x\nmodel: {path: /m, arch: llama}\n").errors,
            "a.yaml:2:8: model: model.arch cannot be set with model.path: the model's "
            "config.json names its architecture; remove arch");
}

TEST(AppSpec, ClusterAndElasticRoles) {
  auto p = parse(
      "app: x\ncluster: {local_workers: 2, heartbeat_misses: 3}\nroles:\n"
      "  w: {impl: i, elastic: {min: 1, max: 8}, placement: spread}\n");
  ASSERT_EQ(p.errors, "");
  EXPECT_EQ(p.spec.cluster.local_workers, 2);
  EXPECT_EQ(p.spec.cluster.heartbeat_interval_ms, 500);
  EXPECT_EQ(p.spec.roles[0].elastic->max, 8);
  // null unsets an optional part (what `--set roles.w.elastic=null` writes)
  auto fixed = parse("app: x\nroles:\n  w: {impl: i, count: 2, elastic: null}\n");
  ASSERT_EQ(fixed.errors, "");
  EXPECT_FALSE(fixed.spec.roles[0].elastic.has_value());
  EXPECT_EQ(parse("app: x\nroles:\n  w: {impl: i, elastic: {min: 4, max: 2}}\n").errors,
            "a.yaml:3:25: roles.w.elastic: min 4 is larger than max 2");
  EXPECT_EQ(parse("app: x\ncluster: {listen: 'localhost'}\n").errors,
            "a.yaml:2:19: cluster.listen: 'localhost' is not a tcp://HOST:PORT endpoint");
  EXPECT_NE(parse("app: x\nroles:\n  w: {impl: i, placement: moon}\n")
                .errors.find("Valid values: spread, head."),
            std::string::npos);
}

TEST(AppSpec, AutoscaleDownToZeroWithAnOptionalDelay) {
  auto p = parse("app: x\nroles:\n  w: {impl: i, autoscale: {min: 0, max: 2}}\n");
  ASSERT_EQ(p.errors, "");
  EXPECT_EQ(p.spec.roles[0].autoscale->min, 0);
  EXPECT_FALSE(p.spec.roles[0].autoscale->downscale_to_zero_delay_s.has_value());
  EXPECT_EQ(p.spec.roles[0].autoscale->look_back_period_s, 30);  // Ray Serve's default
  // Unset, it stays out of the resolved config; set, it is written back.
  EXPECT_FALSE(app_spec_schema()
                   .to_node(p.spec)["roles"]["w"]["autoscale"]["downscale_to_zero_delay_s"]
                   .IsDefined());
  auto set =
      parse("app: x\nroles:\n  w: {impl: i, autoscale: {min: 0, downscale_to_zero_delay_s: 5}}\n");
  ASSERT_EQ(set.errors, "");
  EXPECT_EQ(*set.spec.roles[0].autoscale->downscale_to_zero_delay_s, 5.0);
  EXPECT_EQ(app_spec_schema()
                .to_node(set.spec)["roles"]["w"]["autoscale"]["downscale_to_zero_delay_s"]
                .as<double>(),
            5.0);
  auto unset = parse(
      "app: x\nroles:\n  w: {impl: i, autoscale: {min: 0, downscale_to_zero_delay_s: null}}\n");
  ASSERT_EQ(unset.errors, "");
  EXPECT_FALSE(unset.spec.roles[0].autoscale->downscale_to_zero_delay_s.has_value());
  EXPECT_EQ(
      parse("app: x\nroles:\n  w: {impl: i, autoscale: {downscale_to_zero_delay_s: -1}}\n").errors,
      "a.yaml:3:55: roles.w.autoscale.downscale_to_zero_delay_s: must be between 0 and 86400, "
      "got -1");
  EXPECT_EQ(parse("app: x\nroles:\n  w: {impl: i, autoscale: {look_back_period_s: soon}}\n").errors,
            "a.yaml:3:48: roles.w.autoscale.look_back_period_s: expected a number, got 'soon'");
}

TEST(AppSpec, RoleCountAndImplChecked) {
  EXPECT_EQ(parse("app: x\nroles:\n  a: {impl: i, count: 0}\n").errors,
            "a.yaml:3:23: roles.a.count: must be between 1 and 4096, got 0");
  EXPECT_EQ(parse("app: x\nroles:\n  a: {count: 2}\n").errors,
            "a.yaml:3:6: roles.a: missing required key 'impl'");
}

}  // namespace
}  // namespace troupe::config
