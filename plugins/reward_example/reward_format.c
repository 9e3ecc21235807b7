/* The reward example plugin, in C: a rule reward added through the C ABI alone
 * (runtime/plugin/plugin_abi.h), for app: rlhf's digit-completion prompts.
 *
 *   roles:
 *     reward: {kind: reward, impl: digits_format, plugin: reward_example}
 *
 * digits_format scores the format of a response, not its numbers: the share of its bytes that
 * are digits or commas, if it ended with the end string (0 if it ran out of tokens); an empty
 * ended response scores 1. */
#include <ctype.h>
#include <stddef.h>

#include "runtime/plugin/plugin_abi.h"

static double digits_format(void* user_data, const char* prompt, size_t prompt_size,
                            const char* response, size_t response_size, int ended) {
  (void)user_data;
  (void)prompt;
  (void)prompt_size;
  if (!ended) return 0.0;
  if (response_size == 0) return 1.0;
  size_t good = 0;
  for (size_t i = 0; i < response_size; ++i) {
    const unsigned char c = (unsigned char)response[i];
    if (isdigit(c) || c == ',') ++good;
  }
  return (double)good / (double)response_size;
}

static void register_rules(troupe_plugin_registrar* registrar) {
  troupe_plugin_add_reward_rule(registrar, "digits_format",
                                "the share of a response's bytes that are digits or commas",
                                digits_format, NULL);
}

static const troupe_plugin plugin = {TROUPE_PLUGIN_ABI_VERSION, sizeof(troupe_plugin),
                                     "reward_example", "A rule reward written in C",
                                     register_rules};

__attribute__((visibility("default"))) const troupe_plugin* troupe_plugin_entry(void) {
  return &plugin;
}
