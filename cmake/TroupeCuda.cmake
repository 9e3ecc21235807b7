# CUDA is compiled wherever nvcc exists, so CI proves GPU code builds without a GPU.
# TROUPE_CUDA: AUTO (default) compiles CUDA when nvcc is found, ON requires it, OFF skips it.
set(TROUPE_CUDA AUTO CACHE STRING "Compile CUDA code: AUTO, ON or OFF")
set_property(CACHE TROUPE_CUDA PROPERTY STRINGS AUTO ON OFF)

set(TROUPE_WITH_CUDA OFF)
if(NOT TROUPE_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    set(CMAKE_CUDA_STANDARD 17)  # CMake 3.25 knows no CUDA 20 flags for nvcc
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(TROUPE_WITH_CUDA ON)
  elseif(TROUPE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "TROUPE_CUDA=ON but no CUDA compiler was found; install CUDA or set "
                        "-DTROUPE_CUDA=AUTO")
  endif()
endif()
message(STATUS "troupe: CUDA ${TROUPE_WITH_CUDA}")
if(TROUPE_WITH_CUDA)
  # nvcc 13 warns (#2810) on `status = f()` as if the assignment discarded a [[nodiscard]]
  # absl::Status; the value is kept, so the warning is noise.
  add_compile_options($<$<COMPILE_LANGUAGE:CUDA>:--diag-suppress=2810>)
endif()
