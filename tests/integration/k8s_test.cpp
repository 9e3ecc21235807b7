// deploy/k8s against the real CLI (docs/launch.md "Kubernetes"). No Kubernetes runs here, so the
// test does what the cluster would: each Deployment's container is started as its command line
// says, with its environment (the Secret's keys, the pod's IP), its ConfigMap mounted, the
// Service's name resolving to the head's pod, each pod in a network namespace of its own host.
// The probes must pass, the API must answer through the Service's port, `kubectl scale` (one
// more worker, one SIGTERMed) must grow and shrink the job, and every env var and port the
// manifests use must be one troupe reads.

#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "tests/integration/troupe_cli.hpp"
#include "tests/support/network_namespaces.hpp"

namespace troupe::testing {
namespace {

namespace fs = std::filesystem;

// Every environment variable troupe's sources read (getenv("NAME")).
std::set<std::string> variables_troupe_reads() {
  std::set<std::string> names;
  const std::regex getenv_call(R"re(getenv\("([A-Z_]+)"\))re");
  for (const char* dir : {"runtime", "apps", "actors"}) {
    for (const auto& e : fs::recursive_directory_iterator(fs::path(TROUPE_SOURCE_DIR) / dir)) {
      if (e.path().extension() != ".cpp" && e.path().extension() != ".hpp") continue;
      const std::string text = read_file(e.path().string());
      for (std::sregex_iterator m(text.begin(), text.end(), getenv_call), end; m != end; ++m)
        names.insert((*m)[1]);
    }
  }
  return names;
}

struct manifests {
  std::map<std::string, YAML::Node> by_kind_and_name;  // "Deployment/troupe-head" -> document

  static manifests load() {
    manifests m;
    for (const auto& e : fs::directory_iterator(fs::path(TROUPE_SOURCE_DIR) / "deploy/k8s")) {
      if (e.path().extension() != ".yaml") continue;
      for (const YAML::Node& doc : YAML::LoadAllFromFile(e.path().string()))
        m.by_kind_and_name[doc["kind"].as<std::string>() + "/" +
                           doc["metadata"]["name"].as<std::string>()] = doc;
    }
    return m;
  }
  const YAML::Node& operator[](const std::string& key) const { return by_kind_and_name.at(key); }
  YAML::Node container(const std::string& deployment) const {
    return (*this)["Deployment/" + deployment]["spec"]["template"]["spec"]["containers"][0];
  }
};

class KubernetesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    m_ = manifests::load();
    for (const auto& kv : m_["Secret/troupe-cluster"]["stringData"])
      secret_[kv.first.as<std::string>()] = kv.second.as<std::string>();
    // The ConfigMap, mounted where the head's volume says.
    for (const auto& kv : m_["ConfigMap/troupe-config"]["data"])
      dir_.write("etc/" + kv.first.as<std::string>(), kv.second.as<std::string>());
  }

  // A container's command line as the kubelet makes it: $(VAR) from its env, the mounts under
  // the test's directory, and the Service's name as its address (host 0).
  std::vector<std::string> argv_of(const YAML::Node& c, const std::string& pod_ip) const {
    std::vector<std::string> argv;
    for (const char* part : {"command", "args"}) {
      for (const auto& a : c[part]) {
        std::string arg = a.as<std::string>();
        arg = absl::StrReplaceAll(arg, {{"$(POD_IP)", pod_ip},
                                        {"/etc/troupe", dir_.file("etc")},
                                        {"/var/lib/troupe", dir_.file("var")},
                                        {"troupe-head", hosts_->address(0)}});
        EXPECT_EQ(arg.find("$("), std::string::npos) << "an undefined variable in " << arg;
        argv.push_back(arg);
      }
    }
    EXPECT_EQ(argv.at(0), "troupe");
    argv[0] = TROUPE_BINARY;
    return argv;
  }

  std::vector<std::string> environment() const {
    std::vector<std::string> env;
    for (const auto& [k, v] : secret_)
      env.push_back(k + "=" + v);
    return env;
  }

  // GET (or POST `body` to) `url` from inside host `from`; the HTTP status and body.
  process_result http(int from, const std::string& url, const std::string& body = "") const {
    return run(hosts_->on(from, http_request_argv(url, body)), std::chrono::seconds(90));
  }

  std::unique_ptr<network_namespaces> hosts_;
  manifests m_;
  std::map<std::string, std::string> secret_;
  temp_dir dir_;
};

TEST_F(KubernetesTest, EveryVariableAndPortTheManifestsUseIsOneTroupeReads) {
  const std::set<std::string> read = variables_troupe_reads();
  ASSERT_TRUE(read.contains("TROUPE_CLUSTER_TOKEN"));
  for (const auto& [key, value] : secret_)
    EXPECT_TRUE(read.contains(key)) << key;
  for (const char* d : {"troupe-head", "troupe-worker"}) {
    const YAML::Node c = m_.container(d);
    for (const auto& e : c["env"]) {
      // A variable either troupe reads, or one the command line substitutes.
      const std::string name = e["name"].as<std::string>();
      bool substituted = false;
      for (const auto& a : c["args"])
        substituted = substituted || absl::StrContains(a.as<std::string>(), "$(" + name + ")");
      EXPECT_TRUE(read.contains(name) || substituted) << d << ": " << name;
    }
  }
  // The head's ports are those its config listens on; probes and the Service name them.
  const YAML::Node config = YAML::LoadFile(dir_.file("etc/serve.yaml"));
  const std::set<int> listened = {
      std::stoi(config["cluster"]["listen"].as<std::string>().substr(
          config["cluster"]["listen"].as<std::string>().rfind(':') + 1)),
      std::stoi(config["cluster"]["http"].as<std::string>().substr(
          config["cluster"]["http"].as<std::string>().rfind(':') + 1)),
      config["serve"]["port"].as<int>()};
  const YAML::Node head = m_.container("troupe-head");
  std::set<std::string> port_names;
  for (const auto& p : head["ports"]) {
    EXPECT_TRUE(listened.contains(p["containerPort"].as<int>())) << p["containerPort"];
    port_names.insert(p["name"].as<std::string>());
  }
  EXPECT_EQ(port_names.size(), listened.size());
  for (const char* probe : {"readinessProbe", "livenessProbe"})
    EXPECT_TRUE(port_names.contains(head[probe]["httpGet"]["port"].as<std::string>()));
  for (const auto& p : m_["Service/troupe-head"]["spec"]["ports"])
    EXPECT_TRUE(port_names.contains(p["targetPort"].as<std::string>())) << p["targetPort"];
  // And the config is valid.
  auto checked = run({TROUPE_BINARY, "check", dir_.file("etc/serve.yaml")});
  EXPECT_EQ(checked.exit_code, 0) << checked.out << checked.err;
}

TEST_F(KubernetesTest, TheDeploymentsServeAndScale) {
  auto hosts = network_namespaces::create(2);  // the head's pod's node, the workers'
  if (!hosts.ok()) GTEST_SKIP() << hosts.status();
  hosts_ = std::move(*hosts);
  subprocess head(hosts_->on(0, argv_of(m_.container("troupe-head"), hosts_->address(0))),
                  environment());
  std::vector<std::unique_ptr<subprocess>> workers;
  const auto add_worker = [&] {
    workers.push_back(std::make_unique<subprocess>(
        hosts_->on(1, argv_of(m_.container("troupe-worker"), hosts_->address(1))), environment()));
  };
  const int replicas = m_["Deployment/troupe-worker"]["spec"]["replicas"].as<int>();
  for (int i = 0; i < replicas; ++i)
    add_worker();
  const std::string run_dir = dir_.file("var/run");
  ASSERT_FALSE(wait_for_event(run_dir, "serving", std::chrono::minutes(2)).is_null())
      << head.stderr_so_far();

  // The probe, and the API through the Service's ports, from the workers' node.
  const YAML::Node probe = m_.container("troupe-head")["readinessProbe"]["httpGet"];
  auto health = http(1, "http://" + hosts_->address(0) + ":8080" + probe["path"].as<std::string>());
  ASSERT_EQ(health.exit_code, 0) << health.err;
  EXPECT_EQ(health.out, "{\"status\":\"ok\"}\n");
  const std::string api = "http://" + hosts_->address(0) + ":8000";
  auto completion =
      http(1, api + "/v1/completions", R"({"model":"troupe-tiny","prompt":"Hi","max_tokens":4})");
  ASSERT_EQ(completion.exit_code, 0) << completion.err;
  EXPECT_TRUE(absl::StrContains(completion.out, "\"choices\"")) << completion.out;

  // kubectl scale --replicas=3, then back to 2 (the kubelet sends SIGTERM).
  add_worker();
  wait_until([&] { return events_of(run_dir, "worker_joined").size() == 3; },
             std::chrono::minutes(1));
  ASSERT_EQ(events_of(run_dir, "worker_joined").size(), 3u);
  workers.back()->signal(SIGTERM);
  EXPECT_EQ(workers.back()->wait(std::chrono::minutes(1)).exit_code, 0);
  ASSERT_FALSE(wait_for_event(run_dir, "member_left", std::chrono::minutes(1)).is_null());
  auto after =
      http(1, api + "/v1/completions", R"({"model":"troupe-tiny","prompt":"Hi","max_tokens":4})");
  ASSERT_EQ(after.exit_code, 0) << after.err;

  head.signal(SIGTERM);  // the Deployment deleted: the head drains and stops its workers
  EXPECT_EQ(head.wait(std::chrono::minutes(1)).exit_code, 0);
  for (size_t i = 0; i + 1 < workers.size(); ++i)
    EXPECT_EQ(workers[i]->wait(std::chrono::seconds(30)).exit_code, 0);
}

}  // namespace
}  // namespace troupe::testing
