# ctest driver for cudasim-cc (cmake -P): compiles and runs programs and checks what they print.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})

function(expect what result out pattern)
  if(NOT "${out}" MATCHES "${pattern}")
    message(FATAL_ERROR "${what}: output does not match '${pattern}':\n${out}")
  endif()
endfunction()

# 1. The showcase compiles with nvcc-style flags and runs correctly.
execute_process(COMMAND ${CC} -O2 -arch=sm_80 --use_fast_math -lineinfo ${SOURCE} -o ${WORK}/showcase
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cudasim-cc failed on the showcase:\n${out}")
endif()
execute_process(COMMAND ${WORK}/showcase RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
message("${out}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the showcase reported wrong results (exit ${rc})")
endif()
expect("showcase" ${rc} "${out}" "all results correct")

# 2. The divergent barrier is reported with the kernel, both threads and file:line; exit 70.
execute_process(COMMAND ${WORK}/showcase --divergent RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
message("${out}")
if(NOT rc EQUAL 70)
  message(FATAL_ERROR "expected exit status 70 from the divergent barrier, got '${rc}'")
endif()
expect("divergent" ${rc} "${out}" "kernel 'divergent_barrier'.*divergent __syncthreads.*showcase.cu:[0-9]+")

# 3. Compiler errors point at the line of the original .cu file, also after a rewritten launch.
file(WRITE ${WORK}/broken.cu
"#include <cuda_runtime.h>
__global__ void k(int* p) { p[threadIdx.x] = 1; }
int main() {
  int* p = nullptr;
  k<<<1, 32>>>(p);
  undeclared_name = 3;
  return 0;
}
")
execute_process(COMMAND ${CC} ${WORK}/broken.cu -o ${WORK}/broken RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(rc EQUAL 0)
  message(FATAL_ERROR "broken.cu compiled")
endif()
expect("line mapping" ${rc} "${out}" "broken.cu:6:[0-9]+: error: [^\n]*undeclared_name")

# 4. Separate compilation (-c) and linking object files.
file(WRITE ${WORK}/kern.cu
"#include <cuda_runtime.h>
__global__ void twice(int* p) { p[threadIdx.x] *= 2; }
void run_twice(int* p, int n) { twice<<<1, n>>>(p); }
")
file(WRITE ${WORK}/main.cpp
"#include <cuda_runtime.h>
#include <cstdio>
void run_twice(int*, int);
int main() {
  int h[8] = {1, 2, 3, 4, 5, 6, 7, 8}, *d;
  cudaMalloc(&d, sizeof h);
  cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice);
  run_twice(d, 8);
  cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
  std::printf(\"%d %d\\\\n\", h[0], h[7]);
  return 0;
}
")
execute_process(COMMAND ${CC} -c ${WORK}/kern.cu -o ${WORK}/kern.o RESULT_VARIABLE rc ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cudasim-cc -c failed:\n${out}")
endif()
execute_process(COMMAND ${CC} ${WORK}/main.cpp ${WORK}/kern.o -o ${WORK}/twice RESULT_VARIABLE rc ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "linking with cudasim-cc failed:\n${out}")
endif()
execute_process(COMMAND ${WORK}/twice RESULT_VARIABLE rc OUTPUT_VARIABLE out)
expect("separate compilation" ${rc} "${out}" "^2 16")
# 5. --check: a program built for checking names a race with both lines; built without, asking
#    for checks says how to get them.
file(WRITE ${WORK}/race.cu
"#include <cuda_runtime.h>
#include <cstdio>
__global__ void broadcast(float* out) {
  __shared__ float value;
  if (threadIdx.x == 0) value = 42.f;
  out[threadIdx.x] = value;
}
int main() {
  float* d;
  cudaMalloc(&d, 64 * sizeof(float));
  broadcast<<<1, 64>>>(d);
  cudaDeviceSynchronize();
  std::printf(\"done\\n\");
  return 0;
}
")
execute_process(COMMAND ${CC} --check ${WORK}/race.cu -o ${WORK}/race-checked RESULT_VARIABLE rc ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cudasim-cc --check failed:\n${out}")
endif()
execute_process(COMMAND ${WORK}/race-checked RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
message("${out}")
if(NOT rc EQUAL 70)
  message(FATAL_ERROR "expected exit status 70 from the race in the checked build, got '${rc}'")
endif()
expect("--check" ${rc} "${out}" "kernel 'broadcast'.*shared-memory race .* on __shared__ variable 'value'.*race.cu:[56].*race.cu:[56]")
execute_process(COMMAND ${CC} ${WORK}/race.cu -o ${WORK}/race RESULT_VARIABLE rc ERROR_VARIABLE out)
execute_process(COMMAND ${CMAKE_COMMAND} -E env CUDASIM_CHECK=all ${WORK}/race RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the unchecked build failed (exit ${rc}):\n${out}")
endif()
expect("unchecked build" ${rc} "${out}" "built without checking.*cudasim-cc --check")
message("cudasim-cc: 5 checks passed")
