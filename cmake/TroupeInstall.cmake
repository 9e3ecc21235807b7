# `cmake --install build --prefix P` (docs/plugins.md "Out of tree, against an installed troupe"):
#
#   P/bin/troupe                        finds its plugins and share/ relative to itself
#   P/lib/troupe/libtroupe_{core,kernels,models}.so   private to troupe and its plugins
#   P/lib/troupe/plugins/               the plugins that ship with troupe
#   P/share/troupe/{configs,docs}/
#   P/include/troupe/                   the plugin SDK's headers, and what they include
#   P/lib/cmake/troupe/                 troupeConfig.cmake: troupe::plugin_sdk, troupe_add_plugin()
include(CMakePackageConfigHelpers)

set_target_properties(troupe PROPERTIES INSTALL_RPATH "$ORIGIN/${TROUPE_LIBRARIES_FROM_BINARY}")
install(TARGETS troupe RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS troupe_core EXPORT troupeTargets
        LIBRARY DESTINATION ${TROUPE_INSTALL_LIBRARY_DIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/troupe)
install(EXPORT troupeTargets NAMESPACE troupe:: DESTINATION ${TROUPE_INSTALL_CMAKE_DIR})
install(TARGETS troupe_kernels troupe_models LIBRARY DESTINATION ${TROUPE_INSTALL_LIBRARY_DIR})

# The SDK's headers: the entry points a plugin includes (the C ABI and the C++ plugin API, the
# role context and registry, the actor base, the typed interfaces and messages) and the closure
# of what they include. InstallTest builds every example plugin against them, so a missing one
# fails it.
set(TROUPE_SDK_HEADERS
  runtime/actor/interfaces.hpp runtime/actor/message_types.hpp runtime/actor/messages.hpp
  runtime/actor/role_actor.hpp runtime/actor/role_context.hpp runtime/actor/role_registry.hpp
  runtime/actor/rule_reward.hpp runtime/actor/status_bridge.hpp
  runtime/base/status.hpp runtime/base/suggest.hpp
  runtime/checkpoint/checkpoint_store.hpp
  runtime/config/codec.hpp runtime/config/options_schema.hpp runtime/config/parse_context.hpp
  runtime/config/schema.hpp
  runtime/metrics/actor_stats.hpp runtime/metrics/cycle_clock.hpp runtime/metrics/registry.hpp
  runtime/plugin/plugin_abi.h runtime/plugin/plugin_api.hpp
  runtime/run/event_log.hpp
  runtime/tensor/device.hpp runtime/tensor/dtype.hpp runtime/tensor/safetensors.hpp
  runtime/tensor/tensor.hpp)
foreach(header ${TROUPE_SDK_HEADERS})
  get_filename_component(dir ${header} DIRECTORY)
  install(FILES ${PROJECT_SOURCE_DIR}/${header}
          DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/troupe/${dir})
endforeach()

install(DIRECTORY ${PROJECT_SOURCE_DIR}/configs/ DESTINATION ${CMAKE_INSTALL_DATADIR}/troupe/configs)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DATADIR}/troupe/docs)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/troupeConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/troupeConfig.cmake INSTALL_DESTINATION ${TROUPE_INSTALL_CMAKE_DIR})
# Plugins also check the ABI number at load time; within a minor version the SDK stays put.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/troupeConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/troupeConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/troupeConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/TroupeCaf.cmake
              ${PROJECT_SOURCE_DIR}/cmake/TroupePlugin.cmake
        DESTINATION ${TROUPE_INSTALL_CMAKE_DIR})
