/* SPDX-License-Identifier: MIT */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "macro.h"
#include "preload.h"
#include "version.h"

#define LIBRARY_NAME "libprebind-intercept.so"

static bool readable(const char *path) {
        return access(path, R_OK) == 0;
}

/* The relative path from directory "from" to "to", both absolute and
 * normalised (meson's bindir and libdir/prebind under the prefix). */
void preload_relative_path(const char *from, const char *to, char *buf, size_t size) {
        size_t common = 0, len = 0;

        /* The longest common prefix that ends at a component boundary. */
        for (size_t i = 0;; i++) {
                if ((from[i] == '\0' || from[i] == '/') && (to[i] == '\0' || to[i] == '/'))
                        common = i;
                if (!from[i] || !to[i] || from[i] != to[i])
                        break;
        }
        buf[0] = '\0';
        for (const char *p = from + common; *p; p++)
                if (*p == '/' && p[1] && p[1] != '/' && len + 4 < size)
                        len += (size_t) snprintf(buf + len, size - len, "../");
        snprintf(buf + len, size - len, "%s", to[common] == '/' ? to + common + 1 : to + common);
}

int preload_library_find(char **ret) {
        char exe[PATH_MAX], rel[PATH_MAX], candidate[PATH_MAX * 2 + 64];
        const char *override = getenv("PREBIND_INTERCEPT_LIBRARY");
        ssize_t n;
        char *slash;

        if (override && *override) {
                if (!readable(override))
                        return -ENOENT;
                *ret = strdup(override);
                return *ret ? 0 : -ENOMEM;
        }
        n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n <= 0)
                return -ENOENT;
        exe[n] = '\0';
        slash = strrchr(exe, '/');
        if (!slash)
                return -ENOENT;
        *slash = '\0';

        /* The build tree: build/src/prebind, build/src/intercept/. */
        snprintf(candidate, sizeof candidate, "%s/intercept/%s", exe, LIBRARY_NAME);
        if (!readable(candidate)) {
                preload_relative_path(PREBIND_BINDIR, PREBIND_PKGLIBDIR, rel, sizeof rel);
                snprintf(candidate, sizeof candidate, "%s/%s/%s", exe, rel, LIBRARY_NAME);
                if (!readable(candidate))
                        return -ENOENT;
        }
        *ret = realpath(candidate, NULL);
        return *ret ? 0 : -ENOMEM;
}

/* The parts of an ELF file that matter here: an interpreter (PT_INTERP),
 * and a Go build id note. Both classes, host byte order. */
#define ELF_SCAN(Ehdr, Phdr, Shdr)                                                                                    \
        do {                                                                                                          \
                Ehdr eh;                                                                                              \
                if (pread(fd, &eh, sizeof eh, 0) != (ssize_t) sizeof eh)                                              \
                        return 0;                                                                                     \
                for (unsigned i = 0; i < eh.e_phnum && i < 256; i++) {                                                \
                        Phdr ph;                                                                                      \
                        if (pread(fd, &ph, sizeof ph, (off_t) (eh.e_phoff + (uint64_t) i * eh.e_phentsize)) !=        \
                            (ssize_t) sizeof ph)                                                                      \
                                return 0;                                                                             \
                        if (ph.p_type == PT_INTERP)                                                                   \
                                *has_interp = true;                                                                   \
                }                                                                                                     \
                if (eh.e_shstrndx != SHN_UNDEF && eh.e_shstrndx < eh.e_shnum) {                                       \
                        Shdr strtab;                                                                                  \
                        if (pread(fd, &strtab, sizeof strtab,                                                         \
                                  (off_t) (eh.e_shoff + (uint64_t) eh.e_shstrndx * eh.e_shentsize)) !=                \
                            (ssize_t) sizeof strtab)                                                                  \
                                return 0;                                                                             \
                        for (unsigned i = 0; i < eh.e_shnum && i < 1024; i++) {                                       \
                                Shdr sh;                                                                              \
                                char name[24] = "";                                                                   \
                                if (pread(fd, &sh, sizeof sh,                                                         \
                                          (off_t) (eh.e_shoff + (uint64_t) i * eh.e_shentsize)) !=                    \
                                    (ssize_t) sizeof sh)                                                              \
                                        break;                                                                        \
                                if (pread(fd, name, sizeof name - 1, (off_t) (strtab.sh_offset + sh.sh_name)) <= 0)   \
                                        continue;                                                                     \
                                if (strcmp(name, ".note.go.buildid") == 0 || strcmp(name, ".go.buildinfo") == 0)      \
                                        *is_go = true;                                                                \
                        }                                                                                             \
                }                                                                                                     \
        } while (0)

static int elf_scan(int fd, bool *has_interp, bool *is_go) {
        unsigned char ident[EI_NIDENT];

        if (pread(fd, ident, sizeof ident, 0) != (ssize_t) sizeof ident || memcmp(ident, ELFMAG, SELFMAG) != 0)
                return 0;
        if (ident[EI_CLASS] == ELFCLASS64)
                ELF_SCAN(Elf64_Ehdr, Elf64_Phdr, Elf64_Shdr);
        else if (ident[EI_CLASS] == ELFCLASS32)
                ELF_SCAN(Elf32_Ehdr, Elf32_Phdr, Elf32_Shdr);
        else
                return 0;
        return 1;
}

/* One file: 1 with the interpreter of a #! script in interp, 0 when
 * there is nothing against it, -EPERM with *ret_reason. */
static int check_file(const char *path, char *interp, size_t size, const char **ret_reason) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        char head[256];
        struct stat st;
        bool has_interp = false, is_go = false;
        ssize_t n;

        if (fd < 0 || fstat(fd, &st) < 0)
                return 0;
        /* Secure-execution mode (ld.so(8)): LD_PRELOAD is ignored when exec
         * changes the credentials. */
        if (((st.st_mode & S_ISUID) && st.st_uid != geteuid()) || ((st.st_mode & S_ISGID) && st.st_gid != getegid())) {
                *ret_reason = "is setuid or setgid: the dynamic linker ignores LD_PRELOAD for it";
                return -EPERM;
        }
        if (fgetxattr(fd, "security.capability", NULL, 0) > 0) {
                *ret_reason = "has file capabilities: the dynamic linker ignores LD_PRELOAD for it";
                return -EPERM;
        }
        n = pread(fd, head, sizeof head - 1, 0);
        if (n > 2 && head[0] == '#' && head[1] == '!') {
                char *p = head + 2;

                head[n] = '\0';
                p += strspn(p, " \t");
                p[strcspn(p, " \t\n")] = '\0';
                if (!*p || strlen(p) >= size)
                        return 0;
                memcpy(interp, p, strlen(p) + 1);
                return 1;
        }
        if (elf_scan(fd, &has_interp, &is_go) <= 0)
                return 0;
        if (is_go) {
                *ret_reason = "is a Go program: Go's net package makes its own system calls, which no LD_PRELOAD "
                              "library sees (see --netns)";
                return -EPERM;
        }
        if (!has_interp) {
                *ret_reason = "is statically linked: no dynamic linker loads LD_PRELOAD into it (see --netns)";
                return -EPERM;
        }
        return 0;
}

int preload_check_program(const char *path, const char **ret_reason) {
        char current[256], next[256];

        if (strlen(path) >= sizeof current)
                return 0;
        memcpy(current, path, strlen(path) + 1);
        /* A script is judged by its interpreter: Linux follows at most 4
         * levels of them. */
        for (int depth = 0; depth <= 4; depth++) {
                int r = check_file(current, next, sizeof next, ret_reason);
                if (r <= 0)
                        return r;
                memcpy(current, next, sizeof current);
        }
        return 0;
}

int preload_env_entry(const char *existing, const char *library, char **ret) {
        int n;

        if (strpbrk(library, " :\t\n"))
                return -EINVAL;
        if (existing && *existing)
                n = asprintf(ret, "LD_PRELOAD=%s:%s", existing, library);
        else
                n = asprintf(ret, "LD_PRELOAD=%s", library);
        return n < 0 ? -ENOMEM : 0;
}
