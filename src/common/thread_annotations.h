// Clang thread-safety annotations (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html).
//
// They say in the code which lock guards which state, and clang checks it at
// compile time with -Wthread-safety: touching a GUARDED_BY member or calling
// a REQUIRES function without holding the lock is a compile error in the
// analysis build (scripts/thread_safety_check.sh, run by ctest as
// `thread_safety_analysis`). GCC, which builds the product, ignores them.
#pragma once

#if defined(__clang__)
#define SOFTRNIC_TSA(x) __attribute__((x))
#else
#define SOFTRNIC_TSA(x)
#endif

// A type that is a lock.
#define CAPABILITY(name) SOFTRNIC_TSA(capability(name))
// An RAII type that holds a lock for its lifetime.
#define SCOPED_CAPABILITY SOFTRNIC_TSA(scoped_lockable)
// Data only read or written with the lock held.
#define GUARDED_BY(lock) SOFTRNIC_TSA(guarded_by(lock))
// A pointer whose target is only read or written with the lock held.
#define PT_GUARDED_BY(lock) SOFTRNIC_TSA(pt_guarded_by(lock))
// A function the caller must call with the lock held.
#define REQUIRES(...) SOFTRNIC_TSA(requires_capability(__VA_ARGS__))
// A function the caller must call without the lock (it takes it).
#define EXCLUDES(...) SOFTRNIC_TSA(locks_excluded(__VA_ARGS__))
#define ACQUIRE(...) SOFTRNIC_TSA(acquire_capability(__VA_ARGS__))
#define RELEASE(...) SOFTRNIC_TSA(release_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) SOFTRNIC_TSA(try_acquire_capability(__VA_ARGS__))
// Tells the analysis the lock is held here (checked by the code, not clang).
#define ASSERT_CAPABILITY(lock) SOFTRNIC_TSA(assert_capability(lock))
// The function is outside the analysis; say why where it is used.
#define NO_THREAD_SAFETY_ANALYSIS SOFTRNIC_TSA(no_thread_safety_analysis)
