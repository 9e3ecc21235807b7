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
 * Bump TROUPE_PLUGIN_ABI_VERSION whenever this struct, the registry API or a message type in
 * runtime/actor/messages.hpp changes in a way a compiled plugin would notice. */
#ifndef TROUPE_PLUGIN_ABI_H_
#define TROUPE_PLUGIN_ABI_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TROUPE_PLUGIN_ABI_VERSION 1u

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

#ifdef __cplusplus
}
#endif

#endif /* TROUPE_PLUGIN_ABI_H_ */
