# The lines of python/sglang/kernels/aot/CMakeLists.txt at sglang
# 086ab8b7d78483759363246077c01b76285f720b (the kernel's folder after it moved
# there from sgl-kernel/) that the role's patch rules anchor on and that decide
# which GPU targets are compiled, written out for the tests from the facts of
# that file (not a copy of it): the two policies CMake < 3.30 / 3.31 does not
# know, find_package(CUDAToolkit), one cache variable for the C++ standard,
# FA3's default, torch's -gencode flags cleared (clear_cuda_arches, not
# evaluated here), then a hard-coded list for common_ops and spatial_ops that
# grows after the BF16/FP8 flags, and two lists of their own: FA3 (flash_ops)
# and infllm_ops (code=sm_* only: no PTX). Run with cmake -P, with CUDA_VERSION
# and GPUFLEET_GENCODE_FLAGS given as -D (the tests stub find_package, which
# is not scriptable).
cmake_minimum_required(VERSION 3.20)

cmake_policy(SET CMP0169 OLD)
cmake_policy(SET CMP0177 NEW)

set(SGL_KERNEL_CXX_STANDARD "17" CACHE STRING "C++ standard used for host and CUDA compilation")
set(CMAKE_CXX_STANDARD ${SGL_KERNEL_CXX_STANDARD})

find_package(CUDAToolkit REQUIRED)

option(ENABLE_BELOW_SM90 "Enable gencode below SM90" ON)

set(DEFAULT_SGL_KERNEL_ENABLE_FA3 OFF)
if ("${CUDA_VERSION}" VERSION_GREATER_EQUAL "12.4")
    set(DEFAULT_SGL_KERNEL_ENABLE_FA3 ON)
endif()

set(SGL_KERNEL_CUDA_FLAGS
    "-DNDEBUG"
    "-O3"
    "-gencode=arch=compute_90,code=sm_90"
    "-std=c++${SGL_KERNEL_CXX_STANDARD}"
)
list(APPEND SGL_KERNEL_CUDA_FLAGS "--threads=32")

option(SGL_KERNEL_ENABLE_BF16             "Enable BF16"             ON)
option(SGL_KERNEL_ENABLE_FP4              "Enable FP4"              OFF)
option(SGL_KERNEL_ENABLE_FA3              "Enable FA3"              ${DEFAULT_SGL_KERNEL_ENABLE_FA3})
option(SGL_KERNEL_ENABLE_SM100A           "Enable SM100A"           OFF)

if (SGL_KERNEL_ENABLE_BF16)
    list(APPEND SGL_KERNEL_CUDA_FLAGS "-DFLASHINFER_ENABLE_BF16")
endif()

if (ENABLE_BELOW_SM90)
    list(APPEND SGL_KERNEL_CUDA_FLAGS
        "-gencode=arch=compute_80,code=sm_80"
        "-gencode=arch=compute_89,code=sm_89"
    )
endif()

if ("${CUDA_VERSION}" VERSION_GREATER_EQUAL "12.8" OR SGL_KERNEL_ENABLE_SM100A)
    if ("${CUDA_VERSION}" VERSION_GREATER_EQUAL "12.9")
        list(APPEND SGL_KERNEL_CUDA_FLAGS "-gencode=arch=compute_100f,code=sm_100f")
    else()
        list(APPEND SGL_KERNEL_CUDA_FLAGS "-gencode=arch=compute_100a,code=sm_100a")
    endif()
    list(APPEND SGL_KERNEL_CUDA_FLAGS "-gencode=arch=compute_120a,code=sm_120a")
    if ("${CUDA_VERSION}" VERSION_GREATER_EQUAL "13.0")
        list(APPEND SGL_KERNEL_CUDA_FLAGS "--compress-mode=size")
    endif()
endif()

if ("${CUDA_VERSION}" VERSION_GREATER_EQUAL "12.4" AND SGL_KERNEL_ENABLE_FA3)
    list(APPEND SGL_KERNEL_CUDA_FLAGS "-gencode=arch=compute_90a,code=sm_90a")
endif()

if ("${CUDA_VERSION}" VERSION_GREATER_EQUAL "12.8" OR SGL_KERNEL_ENABLE_FP4)
    list(APPEND SGL_KERNEL_CUDA_FLAGS "-DENABLE_NVFP4=1")
endif()

# common_ops (sm90/ and sm100/) and spatial_ops compile with SGL_KERNEL_CUDA_FLAGS
set(SOURCES
    "csrc/common_extension.cc"
)

# FA3 (flash_ops): sm_90a code, sm_80/86 too under ENABLE_BELOW_SM90
if (SGL_KERNEL_ENABLE_FA3)
    set(SGL_FLASH_KERNEL_CUDA_FLAGS
        "-O3"
        "-gencode=arch=compute_90a,code=sm_90a"
        "-std=c++${SGL_KERNEL_CXX_STANDARD}"
    )
endif()

# infllm_ops: 80 under ENABLE_BELOW_SM90, 90 always, 120a for CUDA >= 12.8
set(INFLLM_FLASH_CUDA_FLAGS
    "-O3"
    "-std=c++${SGL_KERNEL_CXX_STANDARD}"
)
if (ENABLE_BELOW_SM90)
    list(APPEND INFLLM_FLASH_CUDA_FLAGS "-gencode=arch=compute_80,code=sm_80")
endif()
list(APPEND INFLLM_FLASH_CUDA_FLAGS "-gencode=arch=compute_90,code=sm_90")
if ("${CUDA_VERSION}" VERSION_GREATER_EQUAL "12.8" OR SGL_KERNEL_ENABLE_SM100A)
    list(APPEND INFLLM_FLASH_CUDA_FLAGS "-gencode=arch=compute_120a,code=sm_120a")
endif()

set(INFLLM_FLASH_SOURCES
    "csrc/infllm_v2/flash_extension.cc"
)
