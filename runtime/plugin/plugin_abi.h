/* The troupe plugin ABI (DESIGN.md "Plugins").
 *
 * A plugin is a shared library exporting one C function:
 *
 *   const troupe_plugin* troupe_plugin_entry(void);
 *
 * The loader reads `abi_version` and `struct_size` before anything else and refuses a plugin
 * whose numbers differ from its own, naming both. Only then does it read `name` and call
 * `register_fn`, which adds role factories to the registry through the C++ API in
 * runtime/plugin/plugin_api.hpp. Plugins are never unloaded.
 *
 * A plugin written in C adds rule rewards with troupe_plugin_add_reward_rule (below), which
 * libtroupe_core exports; plugins/reward_example is one.
 *
 * Bump TROUPE_PLUGIN_ABI_VERSION whenever this struct, the registry API or a message type in
 * runtime/actor/messages.hpp changes in a way a compiled plugin would notice. */
#ifndef TROUPE_PLUGIN_ABI_H_
#define TROUPE_PLUGIN_ABI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TROUPE_PLUGIN_ABI_VERSION 2u

/* The name of the entry point the loader looks up. */
#define TROUPE_PLUGIN_ENTRY_SYMBOL "troupe_plugin_entry"

/* Opaque in C; in C++ it is troupe::plugin::registrar. */
typedef struct troupe_plugin_registrar troupe_plugin_registrar;

typedef struct troupe_plugin {
  /* Must be TROUPE_PLUGIN_ABI_VERSION of the headers the plugin was built with. */
  uint32_t abi_version;
  /* Must be sizeof(troupe_plugin) of the headers the plugin was built with. */
  uint32_t struct_size;
  /* The plugin's name, as roles name it in `plugin:`; lowercase letters, digits, '_'. */
  const char* name;
  /* A one-line description for `troupe plugins list`. */
  const char* description;
  /* Registers the plugin's roles. Errors (such as a duplicate role) are recorded in the
   * registrar and reported by the loader. */
  void (*register_fn)(troupe_plugin_registrar* registrar);
} troupe_plugin;

typedef const troupe_plugin* (*troupe_plugin_entry_fn)(void);

/* A rule reward: the score of `response` to `prompt` (bytes, not NUL-terminated);
 * `ended` is 1 when the response ended with the task's end string, 0 when it ran out of tokens.
 * It must return a finite number (anything else fails the RL step, naming the rule), and is
 * called by one thread at a time. `user_data` is what was registered with it. */
typedef double (*troupe_reward_fn)(void* user_data, const char* prompt, size_t prompt_size,
                                   const char* response, size_t response_size, int ended);

/* From register_fn: adds the role reward/<name> (kind reward, impl <name>), which scores with
 * `score`. `name` is lowercase letters, digits and '_'; `description` one line for
 * `troupe plugins list`. A bad name or a null `score` is recorded in the registrar, and the
 * loader reports it. */
void troupe_plugin_add_reward_rule(troupe_plugin_registrar* registrar, const char* name,
                                   const char* description, troupe_reward_fn score,
                                   void* user_data);

#ifdef __cplusplus
}
#endif

#endif /* TROUPE_PLUGIN_ABI_H_ */
