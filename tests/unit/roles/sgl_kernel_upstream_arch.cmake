# The lines of sgl-kernel/CMakeLists.txt at sglang 3ec6e09487cbf7424f7875cb098860a2142666a3
# that decide which GPU targets are compiled, written out for the tests from
# the facts of that file (not a copy of it): torch's -gencode flags are cleared
# right after find_package(Torch) (clear_cuda_arches), so only this hard-coded
# list is passed to nvcc (code=sm_* only: no PTX). Run with cmake -P, with
# CUDA_VERSION and GPUFLEET_GENCODE_FLAGS given as -D.
cmake_minimum_required(VERSION 3.20)

set(SGL_KERNEL_CUDA_FLAGS
    "-DNDEBUG"
    "-O3"
    "-gencode=arch=compute_90,code=sm_90"
    "-std=c++17"
    "--threads=32"
)

option(SGL_KERNEL_ENABLE_SM100A           "Enable SM100A"           OFF)
option(SGL_KERNEL_ENABLE_SM90A            "Enable SM90A"            OFF)
option(SGL_KERNEL_ENABLE_BF16             "Enable BF16"             ON)
option(SGL_KERNEL_ENABLE_FP4              "Enable FP4"              OFF)
option(SGL_KERNEL_ENABLE_FA3              "Enable FA3"              OFF)
option(ENABLE_BELOW_SM90 "Enable below SM90" ON)

if (ENABLE_BELOW_SM90)
    list(APPEND SGL_KERNEL_CUDA_FLAGS
        "-gencode=arch=compute_75,code=sm_75"
        "-gencode=arch=compute_80,code=sm_80"
        "-gencode=arch=compute_89,code=sm_89"
    )
endif()

if ("${CUDA_VERSION}" VERSION_GREATER_EQUAL "13.0" OR SGL_KERNEL_ENABLE_SM100A)
    list(APPEND SGL_KERNEL_CUDA_FLAGS
        "-gencode=arch=compute_100,code=sm_110"
        "-gencode=arch=compute_100a,code=sm_110a"
    )
elseif ("${CUDA_VERSION}" VERSION_GREATER_EQUAL "12.8" OR SGL_KERNEL_ENABLE_SM100A)
    list(APPEND SGL_KERNEL_CUDA_FLAGS
        "-gencode=arch=compute_100,code=sm_100"
        "-gencode=arch=compute_100a,code=sm_100a"
        "-gencode=arch=compute_120,code=sm_120"
    )
endif()

if ("${CUDA_VERSION}" VERSION_GREATER_EQUAL "12.4" OR SGL_KERNEL_ENABLE_SM90A)
    set(SGL_KERNEL_ENABLE_FA3 ON)
    list(APPEND SGL_KERNEL_CUDA_FLAGS
        "-gencode=arch=compute_90a,code=sm_90a"
    )
endif()

if (SGL_KERNEL_ENABLE_BF16)
    list(APPEND SGL_KERNEL_CUDA_FLAGS
        "-DFLASHINFER_ENABLE_BF16"
    )
endif()

if ("${CUDA_VERSION}" VERSION_GREATER_EQUAL "12.8" OR SGL_KERNEL_ENABLE_FP4)
    list(APPEND SGL_KERNEL_CUDA_FLAGS
        "-DENABLE_NVFP4=1"
    )
endif()

# FA3 (flash_ops) has its own list: sm_90a code only.
set(SGL_FLASH_KERNEL_CUDA_FLAGS
    "-O3"
    "-gencode=arch=compute_90a,code=sm_90a"
)
