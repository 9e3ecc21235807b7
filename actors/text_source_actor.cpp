#include "actors/text_source_actor.hpp"

#include <filesystem>
#include <memory>

#include "runtime/actor/interfaces.hpp"
#include "runtime/actor/role_context.hpp"

namespace troupe::actors {

actor::role_factory text_source_factory() {
  config::object_schema<text_source_options> schema;
  schema.add("path", &text_source_options::path)
      .required()
      .check([](const std::string& path) -> std::optional<std::string> {
        std::error_code ec;
        if (std::filesystem::exists(path, ec)) return std::nullopt;
        std::string hint = path.starts_with("/usr/share/games/fortunes")
                               ? "; it comes with the Debian package 'fortunes' (scripts/setup.sh)"
                               : "";
        return "no such file or directory: " + path + hint;
      })
      .help("a text file, or a directory of text files read in name order");
  schema.add("delimiter", &text_source_options::delimiter)
      .help("a line equal to this separates records; empty: one record per line");
  schema.add("limit", &text_source_options::limit)
      .range(0, int64_t{1} << 40)
      .help("use only the first N records; 0 = all");
  return actor::make_role_factory<text_source_options>(
      "records from text files, split on a delimiter line", std::move(schema),
      [](actor::role_context& ctx,
         const text_source_options& options) -> absl::StatusOr<caf::actor> {
        auto source = text_source::open(options);
        if (!source.ok()) return source.status();
        auto shared = std::make_shared<const text_source>(std::move(*source));
        auto handle =
            ctx.spawn<actor::source_actor>([shared](actor::role_pointer<actor::source_actor> self)
                                               -> actor::source_actor::behavior_type {
              (void)self;
              return {[shared](actor::next_atom, uint64_t first, uint32_t max) {
                return shared->batch(first, max);
              }};
            });
        return caf::actor_cast<caf::actor>(handle);
      });
}

}  // namespace troupe::actors
