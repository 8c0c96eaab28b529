/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>

/* Putting libprebind-intercept.so into COMMAND (--intercept). */

/* Where the library is: $PREBIND_INTERCEPT_LIBRARY if set (tests), else
 * beside prebind's own executable as meson builds it (intercept/), else
 * where meson installs it relative to the installed executable
 * (<bindir>/../<libdir>/prebind/), so that a build tree and an install,
 * moved anywhere, both work. Returns 0 and a new string, or -ENOENT. */
int preload_library_find(char **ret);

/* Can a preloaded library see this program's bind()? path is COMMAND as
 * found on PATH. Returns 0, or -EPERM with *ret_reason, a phrase such as
 * "is statically linked", for a program the dynamic linker does not
 * preload into (static ELF, setuid/setgid or file capabilities), or whose
 * system calls bypass the C library (Go). A #! script is judged by its
 * interpreter. Files that cannot be read are left for exec to judge (0). */
int preload_check_program(const char *path, const char **ret_reason);

/* "LD_PRELOAD=<existing>:<library>": the user's libraries stay first.
 * Returns 0 and a new string, -EINVAL if library holds a space or a ':'
 * (LD_PRELOAD's separators), or -ENOMEM. */
int preload_env_entry(const char *existing, const char *library, char **ret);

/* The relative path from directory from to to, both absolute:
 * ("/usr/bin", "/usr/lib/x86_64-linux-gnu/prebind") gives
 * "../lib/x86_64-linux-gnu/prebind". */
void preload_relative_path(const char *from, const char *to, char *buf, size_t size);
