# Fails when a library file includes a header of a layer below its own
# (docs/design.md draws the order). Run by ctest (the test peakmem_layers):
#   cmake -DSOURCE_DIR=<repo> -DLAYERS=ir,semantics,... -P cmake/check_layers.cmake
# LAYERS lists the layers from the one everything depends on down; a file
# may include headers of its own layer and of the layers before it in the
# list. A layer is a folder of include/peakmem/ and src/, except `analyze`:
# the front door include/peakmem/analyze.h (one header, no folder).
# Unit tests beside their sources (*_test.cc, *_test_util.h) are not checked:
# they are no part of the library (CMakeLists.txt links them apart) and may
# build their input through the front door.
cmake_minimum_required(VERSION 3.24)
if(NOT DEFINED SOURCE_DIR OR NOT DEFINED LAYERS)
  message(FATAL_ERROR "usage: cmake -DSOURCE_DIR=<repo> -DLAYERS=a,b,... -P check_layers.cmake")
endif()
string(REPLACE "," ";" order "${LAYERS}")

# The layer a path names (a file of the tree, or a header as included:
# "peakmem/<layer>/..." or "peakmem/analyze.h"), or "" for none.
function(layer_of path out)
  set(layer "")
  if(path MATCHES "^(include/)?peakmem/([a-z_]+)/")
    set(layer "${CMAKE_MATCH_2}")
  elseif(path MATCHES "^src/([a-z_]+)/")
    set(layer "${CMAKE_MATCH_1}")
  elseif(path MATCHES "^(include/)?peakmem/([a-z_]+)\\.h$")
    set(layer "${CMAKE_MATCH_2}")
  endif()
  set(${out} "${layer}" PARENT_SCOPE)
endfunction()

file(GLOB_RECURSE files RELATIVE "${SOURCE_DIR}" "${SOURCE_DIR}/include/peakmem/*.h"
     "${SOURCE_DIR}/src/*.h" "${SOURCE_DIR}/src/*.cc")
set(problems "")
set(checked 0)
foreach(file IN LISTS files)
  if(file MATCHES "_test\\.cc$|_test_util\\.h$")
    continue()
  endif()
  layer_of("${file}" layer)
  list(FIND order "${layer}" rank)
  if(rank LESS 0)
    string(APPEND problems "\n  ${file}: in no layer of ${LAYERS}")
    continue()
  endif()
  math(EXPR checked "${checked} + 1")
  file(STRINGS "${SOURCE_DIR}/${file}" includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"peakmem/")
  foreach(line IN LISTS includes)
    string(REGEX REPLACE "^[^\"]*\"([^\"]*)\".*$" "\\1" header "${line}")
    layer_of("${header}" target)
    list(FIND order "${target}" target_rank)
    if(target_rank LESS 0)
      string(APPEND problems "\n  ${file}: includes ${header}, in no layer of ${LAYERS}")
    elseif(target_rank GREATER rank)
      string(APPEND problems "\n  ${file}: ${layer} includes ${header} (${target}, a layer below it)")
    endif()
  endforeach()
endforeach()
if(NOT problems STREQUAL "")
  message(FATAL_ERROR "include against the layer order ${LAYERS}:${problems}")
endif()
message(STATUS "${checked} files include only their own layer and the layers above it (${LAYERS})")
