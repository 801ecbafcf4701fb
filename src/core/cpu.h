// Which instruction sets this CPU can run, for picking a kernel variant at run time. Variants
// live in their own translation units (*_avx512.cpp, *_avx2.cpp, see CMakeLists.txt) and may be
// called only when the CPU has the ISA (kernels/kernel_config.h picks one).
#pragma once

#include <string>
#include <vector>

namespace dsinfer {

// Ordered from the most portable up; kCount is the sentinel.
enum class Isa { kScalar, kAvx2, kAvx512, kCount };

const char* isa_name(Isa isa);

// True when the CPU (and OS) can run code built for `isa`. kAvx2 means AVX2+FMA+F16C; kAvx512
// means F/BW/VL/DQ plus the BF16 dot-product extension.
bool cpu_supports(Isa isa);

// True when the CPU has AMX tiles with bf16 (AMX-TILE, AMX-BF16) and AVX512_BF16; the OS must
// still grant the tile state (arch_prctl), which the AMX kernels ask for themselves.
bool cpu_has_amx_bf16();

// True when the CPU has AVX512-VNNI (VPDPBUSD), beside cpu_supports(Isa::kAvx512).
bool cpu_has_avx512_vnni();

// True on an AMD CPU (the kernels tune their memory access per vendor, kernels/linear.h).
bool cpu_is_amd();

// The CPU's family as CPUID reports it (base plus extended family): on AMD 25 is Zen 3 / Zen 4,
// 26 Zen 5. 0 where unknown.
int cpu_family();

// The best ISA the CPU supports, at most `cap`.
Isa best_isa(Isa cap = Isa::kAvx512);

// Every ISA this CPU can run, scalar first (for tests that compare variants).
std::vector<Isa> supported_isas();

}  // namespace dsinfer
