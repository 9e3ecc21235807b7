// A plugin built deliberately wrong: its ABI version or its struct size is off, so the loader
// must refuse it before reading anything else. Built twice (abi_mismatch, size_mismatch).

#include "runtime/plugin/plugin_abi.h"

#ifndef TROUPE_TEST_ABI_VERSION_OFFSET
#define TROUPE_TEST_ABI_VERSION_OFFSET 0
#endif
#ifndef TROUPE_TEST_STRUCT_SIZE_OFFSET
#define TROUPE_TEST_STRUCT_SIZE_OFFSET 0
#endif

namespace {

void must_not_be_called(troupe_plugin_registrar*) {
  __builtin_trap();
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const troupe_plugin* troupe_plugin_entry(void) {
  static const troupe_plugin plugin = {
      TROUPE_PLUGIN_ABI_VERSION + TROUPE_TEST_ABI_VERSION_OFFSET,
      static_cast<uint32_t>(sizeof(troupe_plugin) + TROUPE_TEST_STRUCT_SIZE_OFFSET), "mismatch",
      "refused by the loader", must_not_be_called};
  return &plugin;
}
