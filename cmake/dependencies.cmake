# The C++ libraries peakmem builds with, each taken from the system when an
# installed CMake package satisfies it (Debian's -dev packages, Homebrew,
# conda, a -DCMAKE_PREFIX_PATH), and otherwise fetched from its upstream
# repository at the pinned release and built as part of this project, so
# that `pip install .` needs nothing but a C++20 compiler and network access.
#
#   -DFETCHCONTENT_TRY_FIND_PACKAGE_MODE=NEVER   fetch every one (ignore the system)
#   -DCMAKE_DISABLE_FIND_PACKAGE_<Name>=ON        fetch just that one
#   -DFETCHCONTENT_SOURCE_DIR_<NAME>=/path        build that one from a local copy
#                                                 of its sources instead of fetching
#
# The pins: a release tag each (cloned shallow), with the commit it names
# for checking a copy against. They are releases the code builds with when
# fetched; the system versions it is built with on Debian 12 are older
# (nlohmann-json 3.11.2, fmt 9.1, simdjson 3.0.1, Abseil 20220623, CLI11 2.1.2,
# GoogleTest 1.12.1, Google Benchmark 1.7.1), hence the minimum versions.
#
# Fetched libraries are configured not to install anything: the wheel holds
# only peakmem (see the COMPONENT python install rules in CMakeLists.txt).
include(FetchContent)

if(CMAKE_VERSION VERSION_LESS 3.24)
  message(FATAL_ERROR "peakmem needs CMake >= 3.24 (FetchContent's FIND_PACKAGE_ARGS); "
                      "`pip install cmake` gives a current one")
endif()

find_package(Threads REQUIRED)

# A fetched library builds only what peakmem links (not, say, all of Abseil),
# where CMake can say so (3.28).
set(peakmem_fetch_options GIT_SHALLOW TRUE)
if(CMAKE_VERSION VERSION_GREATER_EQUAL 3.28)
  list(APPEND peakmem_fetch_options EXCLUDE_FROM_ALL)
endif()

# nlohmann-json (JSON output). v3.11.3 = 9cca280a4d0ccf0c08f47a99aa71d1b0e52f8d03
set(JSON_BuildTests OFF CACHE INTERNAL "")
set(JSON_Install OFF CACHE INTERNAL "")
FetchContent_Declare(nlohmann_json
  GIT_REPOSITORY https://github.com/nlohmann/json.git
  GIT_TAG v3.11.3
  ${peakmem_fetch_options}
  FIND_PACKAGE_ARGS 3.11)

# fmt (formatting; used header-only). 10.2.1 = e69e5f977d458f2650bb346dadf2ad30c5320281
set(FMT_INSTALL OFF CACHE INTERNAL "")
set(FMT_TEST OFF CACHE INTERNAL "")
set(FMT_DOC OFF CACHE INTERNAL "")
FetchContent_Declare(fmt
  GIT_REPOSITORY https://github.com/fmtlib/fmt.git
  GIT_TAG 10.2.1
  ${peakmem_fetch_options}
  FIND_PACKAGE_ARGS 9)

# simdjson (the JSON trace reader; On-Demand gives token positions).
# v3.0.1 = 0d2455029d845e801809dd54b01ae47173d7d8e8: the release Debian 12
# has, because bad-input errors quote simdjson's messages, which the tests
# pin and later releases word differently. Built static (as
# BUILD_SHARED_LIBS is unset) and position-independent (CMakeLists.txt).
FetchContent_Declare(simdjson
  GIT_REPOSITORY https://github.com/simdjson/simdjson.git
  GIT_TAG v3.0.1
  ${peakmem_fetch_options}
  FIND_PACKAGE_ARGS 3)

# Abseil (flat hash maps and inlined vectors on the hot paths).
# 20240722.1 = dd4c89bd657f1e247ce5111a5c89ffe6ccfd0c92
set(ABSL_PROPAGATE_CXX_STD ON CACHE INTERNAL "")
set(ABSL_BUILD_TESTING OFF CACHE INTERNAL "")
set(ABSL_ENABLE_INSTALL OFF CACHE INTERNAL "")
FetchContent_Declare(absl
  GIT_REPOSITORY https://github.com/abseil/abseil-cpp.git
  GIT_TAG 20240722.1
  ${peakmem_fetch_options}
  FIND_PACKAGE_ARGS)

FetchContent_MakeAvailable(nlohmann_json fmt simdjson absl)
set(peakmem_dependencies nlohmann_json fmt simdjson absl)

# CLI11 (the command line). v2.4.2 = 6c7b07a878ad834957b98d0f9ce1dbe0cb204fc9
if(PEAKMEM_BUILD_CLI)
  set(CLI11_INSTALL OFF CACHE INTERNAL "")
  set(CLI11_BUILD_TESTS OFF CACHE INTERNAL "")
  set(CLI11_BUILD_EXAMPLES OFF CACHE INTERNAL "")
  set(CLI11_BUILD_DOCS OFF CACHE INTERNAL "")
  FetchContent_Declare(CLI11
    GIT_REPOSITORY https://github.com/CLIUtils/CLI11.git
    GIT_TAG v2.4.2
    ${peakmem_fetch_options}
    FIND_PACKAGE_ARGS 2)
  FetchContent_MakeAvailable(CLI11)
  list(APPEND peakmem_dependencies CLI11)
endif()

# GoogleTest (tests only). v1.15.2 = b514bdc898e2951020cbdca1304b75f5950d1f59
if(PEAKMEM_BUILD_TESTS)
  set(INSTALL_GTEST OFF CACHE INTERNAL "")
  set(BUILD_GMOCK OFF CACHE INTERNAL "")
  FetchContent_Declare(GTest
    GIT_REPOSITORY https://github.com/google/googletest.git
    GIT_TAG v1.15.2
    ${peakmem_fetch_options}
    FIND_PACKAGE_ARGS)
  FetchContent_MakeAvailable(GTest)
  list(APPEND peakmem_dependencies GTest)
endif()

# Google Benchmark (bench/ only). v1.9.1 = c58e6d0710581e3a08d65c349664128a8d9a2461
if(PEAKMEM_BUILD_BENCH)
  set(BENCHMARK_ENABLE_TESTING OFF CACHE INTERNAL "")
  set(BENCHMARK_ENABLE_GTEST_TESTS OFF CACHE INTERNAL "")
  set(BENCHMARK_ENABLE_INSTALL OFF CACHE INTERNAL "")
  FetchContent_Declare(benchmark
    GIT_REPOSITORY https://github.com/google/benchmark.git
    GIT_TAG v1.9.1
    ${peakmem_fetch_options}
    FIND_PACKAGE_ARGS)
  FetchContent_MakeAvailable(benchmark)
  list(APPEND peakmem_dependencies benchmark)
endif()

# Which way each came: a fetched one has a source directory (one that
# find_package satisfied is marked populated too, without one).
foreach(dep IN LISTS peakmem_dependencies)
  string(TOLOWER "${dep}" dep_lower)
  FetchContent_GetProperties(${dep})
  if(${dep_lower}_SOURCE_DIR)
    message(STATUS "peakmem dependency ${dep}: built from source (${${dep_lower}_SOURCE_DIR})")
  else()
    message(STATUS "peakmem dependency ${dep}: system package (${${dep}_DIR})")
  endif()
endforeach()
