// gRPC's callback API keeps an order that a ThreadSanitizer build cannot see: it runs a reactor's
// reactions (OnWriteDone, OnCancel, OnDone, ...) on its own threads, each after the reactor was
// handed to it and after the StartWrite / Finish it answers. That order lives in libgrpc's queues
// and atomics, which Debian builds without TSan, so TSan takes what the reactor wrote before (its
// constructor, the state it changed before Finish) and what a reaction reads (OnDone deleting the
// reactor) for a race. A reactor states the order gRPC keeps:
//
//   WorkStream(...) : farm_(farm), device_(device) {}
//   void start() { rpc::handed_to_grpc(this); ... }       // set up: gRPC may react from now on
//   rpc::handed_to_grpc(this); Finish(status);            // before each StartWrite / Finish
//   void OnDone() override { rpc::reacting(this); ... }   // first thing in every reaction
//
// Both compile to nothing outside TSan builds; under TSan they are a release and an acquire on
// the reactor's address. They order only what gRPC orders; the reactor's own state shared with
// other threads still needs its own lock.
#pragma once

#include "base/sanitizers.h"

#if KILN_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace kiln::rpc {

/// The reactor is set up, or about to call StartWrite / Finish: what it wrote so far happens
/// before the reactions that follow.
inline void handed_to_grpc(const void* reactor) {
#if KILN_TSAN
  __tsan_release(const_cast<void*>(reactor));
#else
  (void)reactor;
#endif
}

/// A reaction of the reactor begins: everything before the reactor was handed to gRPC happened
/// before it.
inline void reacting(const void* reactor) {
#if KILN_TSAN
  __tsan_acquire(const_cast<void*>(reactor));
#else
  (void)reactor;
#endif
}

}  // namespace kiln::rpc
