/* SPDX-License-Identifier: MIT */
#pragma once

/* System calls without the C library, for the guard: it runs on
 * prebind's memory (clone(CLONE_VM), see guard.c) and with prebind's
 * thread pointer, so a libc wrapper that failed would write prebind's
 * errno, and one that allocates would use prebind's heap, both while
 * prebind runs. These return the result, or -errno, and touch nothing
 * else. Where there is no instruction sequence here, RAW_SYSCALL_INLINE
 * is 0: the calls go through syscall(3) (errno written), and the guard
 * runs as a fork() of its own (guard.c). prebind uses them too where the
 * guard shares its code (fd.c). */

#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__) && !defined(__ILP32__) /* not x32: long is 32 bits there */
#define RAW_SYSCALL_INLINE 1
static inline long raw_syscall6(long n, long a, long b, long c, long d, long e, long f) {
        register long r10 __asm__("r10") = d;
        register long r8 __asm__("r8") = e;
        register long r9 __asm__("r9") = f;
        long ret;

        __asm__ volatile("syscall"
                         : "=a"(ret)
                         : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                         : "rcx", "r11", "memory");
        return ret;
}
#elif defined(__aarch64__)
#define RAW_SYSCALL_INLINE 1
static inline long raw_syscall6(long n, long a, long b, long c, long d, long e, long f) {
        register long x8 __asm__("x8") = n;
        register long x0 __asm__("x0") = a;
        register long x1 __asm__("x1") = b;
        register long x2 __asm__("x2") = c;
        register long x3 __asm__("x3") = d;
        register long x4 __asm__("x4") = e;
        register long x5 __asm__("x5") = f;

        __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5) : "memory");
        return x0;
}
#else
#define RAW_SYSCALL_INLINE 0
static inline long raw_syscall6(long n, long a, long b, long c, long d, long e, long f) {
        long r = syscall(n, a, b, c, d, e, f);

        return r < 0 ? -errno : r;
}
#endif

/* raw(SYS_close, fd), with up to six arguments of any integer or pointer
 * type. */
#define RAW_ARG(x) ((long) (x))
#define RAW_PICK(_0, _1, _2, _3, _4, _5, _6, name, ...) name
#define raw(...) RAW_PICK(__VA_ARGS__, raw6, raw5, raw4, raw3, raw2, raw1, raw0, _)(__VA_ARGS__)
#define raw0(n) raw_syscall6(n, 0, 0, 0, 0, 0, 0)
#define raw1(n, a) raw_syscall6(n, RAW_ARG(a), 0, 0, 0, 0, 0)
#define raw2(n, a, b) raw_syscall6(n, RAW_ARG(a), RAW_ARG(b), 0, 0, 0, 0)
#define raw3(n, a, b, c) raw_syscall6(n, RAW_ARG(a), RAW_ARG(b), RAW_ARG(c), 0, 0, 0)
#define raw4(n, a, b, c, d) raw_syscall6(n, RAW_ARG(a), RAW_ARG(b), RAW_ARG(c), RAW_ARG(d), 0, 0)
#define raw5(n, a, b, c, d, e) raw_syscall6(n, RAW_ARG(a), RAW_ARG(b), RAW_ARG(c), RAW_ARG(d), RAW_ARG(e), 0)
#define raw6(n, a, b, c, d, e, f)                                                                                     \
        raw_syscall6(n, RAW_ARG(a), RAW_ARG(b), RAW_ARG(c), RAW_ARG(d), RAW_ARG(e), RAW_ARG(f))
