/* SPDX-License-Identifier: MIT */
/* The static build with musl links Debian's libtre.a (meson.build), which
 * glibc's _FORTIFY_SOURCE compiled with two checked calls that musl does
 * not have. They are the unchecked calls here: TRE's own buffers are
 * sized for them, which is all the checked ones verified. */
#include <stdarg.h>
#include <stdio.h>
#include <wchar.h>

int __snprintf_chk(char *s, size_t n, int flag, size_t size, const char *format, ...);
wchar_t *__wcsncpy_chk(wchar_t *dest, const wchar_t *src, size_t n, size_t size);

int __snprintf_chk(char *s, size_t n, int flag, size_t size, const char *format, ...) {
        va_list ap;
        int r;

        va_start(ap, format);
        r = vsnprintf(s, n, format, ap);
        va_end(ap);
        return r;
}

/* wcsncpy() itself is, under glibc's fortified headers, a call of this. */
wchar_t *__wcsncpy_chk(wchar_t *dest, const wchar_t *src, size_t n, size_t size) {
        size_t i = 0;

        for (; i < n && src[i] != L'\0'; i++)
                dest[i] = src[i];
        for (; i < n; i++)
                dest[i] = L'\0';
        return dest;
}
