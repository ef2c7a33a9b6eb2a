// On-demand paging (IBV_ACCESS_ON_DEMAND): a region whose pages need not be
// mapped when it is registered, nor stay mapped while it is.
//
// Hardware ODP resolves a missing translation when a packet needs it (a
// page fault through the kernel's HMM) and completes the access with an
// error when the fault cannot be resolved. softrnic never pins anything, so
// the only difference between an ODP region and any other is what happens
// when the engine touches memory that is not mapped (or not writable): for
// an ODP region the engine asks the kernel to fault the range in first
// (madvise MADV_POPULATE_READ / MADV_POPULATE_WRITE, Linux 5.14) and turns a
// failure into the access error a NIC reports, instead of a SIGSEGV in the
// progress thread. Implicit ODP (ibv_reg_mr(pd, NULL, SIZE_MAX, ...)) is the
// same rule over the whole address space.
//
// What this does not cover: memory unmapped by the application between the
// fault-in and the copy that follows it (microseconds, under the engine
// lock) still faults the process, as a use-after-unmap does without RDMA.
#pragma once

#include <cstdint>

namespace softrnic::engine {

// The whole-address-space region of implicit ODP: base address 0, this
// length (ibv_reg_mr(3): "length SIZE_MAX").
inline constexpr uint64_t kImplicitOdpLength = UINT64_MAX;

// Makes [addr, addr+len) present for reading (need_write false) or writing.
// Returns false if part of the range is not mapped, or not mapped with the
// protection asked for, or cannot be populated (a file mapping past its
// end): the access must fail. A zero-length range is always present.
bool FaultInRange(const uint8_t* addr, uint64_t len, bool need_write);

}  // namespace softrnic::engine
