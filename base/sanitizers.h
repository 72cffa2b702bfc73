// Which sanitizer this translation unit is built with, the same way for g++ (which defines
// __SANITIZE_ADDRESS__ / __SANITIZE_THREAD__) and clang (which answers __has_feature): code that
// must act differently under one (no address-space limit: the shadow memory is address space; crash
// signals left to the sanitizer) asks KILN_ASAN / KILN_TSAN.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define KILN_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KILN_ASAN 1
#endif
#endif
#ifndef KILN_ASAN
#define KILN_ASAN 0
#endif

#if defined(__SANITIZE_THREAD__)
#define KILN_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define KILN_TSAN 1
#endif
#endif
#ifndef KILN_TSAN
#define KILN_TSAN 0
#endif
