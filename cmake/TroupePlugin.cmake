# troupe_add_plugin(NAME SOURCES... [OUTPUT_DIR dir]) builds the plugin troupe_plugin_NAME.so
# against troupe's plugin SDK (troupe::plugin_sdk), in troupe's own tree and out of it
# (find_package(troupe); docs/plugins.md). Out of tree it lands in the project's build directory
# unless OUTPUT_DIR says where; in troupe's tree, in build/plugins, among the plugins
# `cmake --install` installs.
function(troupe_add_plugin name)
  cmake_parse_arguments(ARG "" "OUTPUT_DIR" "" ${ARGN})
  add_library(troupe_plugin_${name} MODULE ${ARG_UNPARSED_ARGUMENTS})
  target_link_libraries(troupe_plugin_${name} PRIVATE troupe::plugin_sdk)
  set_target_properties(troupe_plugin_${name} PROPERTIES PREFIX "")
  if(ARG_OUTPUT_DIR)
    set_target_properties(troupe_plugin_${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${ARG_OUTPUT_DIR})
  elseif(TARGET troupe_plugins)  # one of troupe's own
    add_dependencies(troupe_plugins troupe_plugin_${name})
    set_target_properties(troupe_plugin_${name} PROPERTIES
      LIBRARY_OUTPUT_DIRECTORY ${TROUPE_PLUGIN_OUTPUT_DIR}
      INSTALL_RPATH "$ORIGIN/..")
    install(TARGETS troupe_plugin_${name} LIBRARY DESTINATION ${TROUPE_INSTALL_PLUGIN_DIR})
  endif()
endfunction()
