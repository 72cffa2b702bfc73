# The layer graph as the build sees it: for every target of the project (libraries, executables,
# tests), its type, source folder, sources and the libraries it links, written at configure time
# to ${CMAKE_BINARY_DIR}/kiln_targets.json. scripts/check_layers.py reads it (the CTest test
# layer_check): an #include of a header owned by a library the including target does not depend
# on fails the test command.

# Appends the targets of `dir` and of its subdirectories (recursively) to the list `out`.
function(kiln_collect_targets dir out)
  get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    kiln_collect_targets("${sub}" sub_targets)
    list(APPEND targets ${sub_targets})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# A JSON string of `value`.
function(kiln_json_string value out)
  string(REPLACE "\\" "\\\\" value "${value}")
  string(REPLACE "\"" "\\\"" value "${value}")
  set(${out} "\"${value}\"" PARENT_SCOPE)
endfunction()

# A JSON array of the strings of the list `values`.
function(kiln_json_array values out)
  set(items)
  foreach(v IN LISTS values)
    kiln_json_string("${v}" s)
    list(APPEND items "${s}")
  endforeach()
  list(JOIN items ", " joined)
  set(${out} "[${joined}]" PARENT_SCOPE)
endfunction()

function(kiln_write_layer_graph file)
  kiln_collect_targets("${PROJECT_SOURCE_DIR}" targets)
  set(entries)
  foreach(t IN LISTS targets)
    get_target_property(type ${t} TYPE)
    if(type STREQUAL "UTILITY")
      continue()
    endif()
    get_target_property(source_dir ${t} SOURCE_DIR)
    get_target_property(sources ${t} SOURCES)
    if(NOT sources)
      set(sources)
    endif()
    if(type STREQUAL "INTERFACE_LIBRARY")
      get_target_property(links ${t} INTERFACE_LINK_LIBRARIES)
    else()
      get_target_property(links ${t} LINK_LIBRARIES)
    endif()
    if(NOT links)
      set(links)
    endif()
    kiln_json_string("${t}" name)
    kiln_json_string("${source_dir}" dir)
    kiln_json_array("${sources}" srcs)
    kiln_json_array("${links}" deps)
    list(APPEND entries "  {\"name\": ${name}, \"type\": \"${type}\", \"source_dir\": ${dir},\n   \"sources\": ${srcs},\n   \"links\": ${deps}}")
  endforeach()
  list(JOIN entries ",\n" body)
  kiln_json_string("${PROJECT_SOURCE_DIR}" src)
  kiln_json_string("${PROJECT_BINARY_DIR}" bin)
  file(WRITE "${file}.tmp"
       "{\"source_dir\": ${src}, \"binary_dir\": ${bin}, \"targets\": [\n${body}\n]}\n")
  # Rewritten only when it changes, so that a reconfigure does not look like a new graph.
  file(COPY_FILE "${file}.tmp" "${file}" ONLY_IF_DIFFERENT)
  file(REMOVE "${file}.tmp")
endfunction()
