/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>

#include "compat.h"

/* Built everywhere, so that the unit suite compares it with glibc's. */
const char *prebind_sigabbrev(int sig) {
        /* The signals of Linux, in the kernel's order; SIGRTMIN and above
         * have no abbreviation, as with glibc. */
        static const char *const names[] = {
                [SIGHUP] = "HUP",   [SIGINT] = "INT",       [SIGQUIT] = "QUIT", [SIGILL] = "ILL",
                [SIGTRAP] = "TRAP", [SIGABRT] = "ABRT",     [SIGBUS] = "BUS",   [SIGFPE] = "FPE",
                [SIGKILL] = "KILL", [SIGUSR1] = "USR1",     [SIGSEGV] = "SEGV", [SIGUSR2] = "USR2",
                [SIGPIPE] = "PIPE", [SIGALRM] = "ALRM",     [SIGTERM] = "TERM", [SIGSTKFLT] = "STKFLT",
                [SIGCHLD] = "CHLD", [SIGCONT] = "CONT",     [SIGSTOP] = "STOP", [SIGTSTP] = "TSTP",
                [SIGTTIN] = "TTIN", [SIGTTOU] = "TTOU",     [SIGURG] = "URG",   [SIGXCPU] = "XCPU",
                [SIGXFSZ] = "XFSZ", [SIGVTALRM] = "VTALRM", [SIGPROF] = "PROF", [SIGWINCH] = "WINCH",
                [SIGIO] = "POLL",   [SIGPWR] = "PWR",       [SIGSYS] = "SYS",
        };

        if (sig <= 0 || (size_t) sig >= sizeof names / sizeof names[0])
                return NULL;
        return names[sig];
}

int prebind_sigaddset(sigset_t *set, int sig) {
        /* The bit sigaddset() sets: signal n is bit n-1 of the kernel's
         * mask, which both C libraries keep as the first words of
         * sigset_t. */
        unsigned long *words = (unsigned long *) (void *) set;
        unsigned bit = (unsigned) sig - 1;
        int r = sigaddset(set, sig);

        if (r == 0 || sig != 34)
                return r;
        words[bit / (8 * sizeof *words)] |= 1UL << (bit % (8 * sizeof *words));
        return 0;
}

/* glibc's texts (2.36), by errno name, so that they follow the
 * architecture's numbers. Built everywhere, like prebind_sigabbrev(). */
static const char *const error_texts[] = {
        [0] = "Success",
        [EPERM] = "Operation not permitted",
        [ENOENT] = "No such file or directory",
        [ESRCH] = "No such process",
        [EINTR] = "Interrupted system call",
        [EIO] = "Input/output error",
        [ENXIO] = "No such device or address",
        [E2BIG] = "Argument list too long",
        [ENOEXEC] = "Exec format error",
        [EBADF] = "Bad file descriptor",
        [ECHILD] = "No child processes",
        [EAGAIN] = "Resource temporarily unavailable",
        [ENOMEM] = "Cannot allocate memory",
        [EACCES] = "Permission denied",
        [EFAULT] = "Bad address",
        [ENOTBLK] = "Block device required",
        [EBUSY] = "Device or resource busy",
        [EEXIST] = "File exists",
        [EXDEV] = "Invalid cross-device link",
        [ENODEV] = "No such device",
        [ENOTDIR] = "Not a directory",
        [EISDIR] = "Is a directory",
        [EINVAL] = "Invalid argument",
        [ENFILE] = "Too many open files in system",
        [EMFILE] = "Too many open files",
        [ENOTTY] = "Inappropriate ioctl for device",
        [ETXTBSY] = "Text file busy",
        [EFBIG] = "File too large",
        [ENOSPC] = "No space left on device",
        [ESPIPE] = "Illegal seek",
        [EROFS] = "Read-only file system",
        [EMLINK] = "Too many links",
        [EPIPE] = "Broken pipe",
        [EDOM] = "Numerical argument out of domain",
        [ERANGE] = "Numerical result out of range",
        [EDEADLK] = "Resource deadlock avoided",
        [ENAMETOOLONG] = "File name too long",
        [ENOLCK] = "No locks available",
        [ENOSYS] = "Function not implemented",
        [ENOTEMPTY] = "Directory not empty",
        [ELOOP] = "Too many levels of symbolic links",
        [ENOMSG] = "No message of desired type",
        [EIDRM] = "Identifier removed",
        [ECHRNG] = "Channel number out of range",
        [EL2NSYNC] = "Level 2 not synchronized",
        [EL3HLT] = "Level 3 halted",
        [EL3RST] = "Level 3 reset",
        [ELNRNG] = "Link number out of range",
        [EUNATCH] = "Protocol driver not attached",
        [ENOCSI] = "No CSI structure available",
        [EL2HLT] = "Level 2 halted",
        [EBADE] = "Invalid exchange",
        [EBADR] = "Invalid request descriptor",
        [EXFULL] = "Exchange full",
        [ENOANO] = "No anode",
        [EBADRQC] = "Invalid request code",
        [EBADSLT] = "Invalid slot",
        [EBFONT] = "Bad font file format",
        [ENOSTR] = "Device not a stream",
        [ENODATA] = "No data available",
        [ETIME] = "Timer expired",
        [ENOSR] = "Out of streams resources",
        [ENONET] = "Machine is not on the network",
        [ENOPKG] = "Package not installed",
        [EREMOTE] = "Object is remote",
        [ENOLINK] = "Link has been severed",
        [EADV] = "Advertise error",
        [ESRMNT] = "Srmount error",
        [ECOMM] = "Communication error on send",
        [EPROTO] = "Protocol error",
        [EMULTIHOP] = "Multihop attempted",
        [EDOTDOT] = "RFS specific error",
        [EBADMSG] = "Bad message",
        [EOVERFLOW] = "Value too large for defined data type",
        [ENOTUNIQ] = "Name not unique on network",
        [EBADFD] = "File descriptor in bad state",
        [EREMCHG] = "Remote address changed",
        [ELIBACC] = "Can not access a needed shared library",
        [ELIBBAD] = "Accessing a corrupted shared library",
        [ELIBSCN] = ".lib section in a.out corrupted",
        [ELIBMAX] = "Attempting to link in too many shared libraries",
        [ELIBEXEC] = "Cannot exec a shared library directly",
        [EILSEQ] = "Invalid or incomplete multibyte or wide character",
        [ERESTART] = "Interrupted system call should be restarted",
        [ESTRPIPE] = "Streams pipe error",
        [EUSERS] = "Too many users",
        [ENOTSOCK] = "Socket operation on non-socket",
        [EDESTADDRREQ] = "Destination address required",
        [EMSGSIZE] = "Message too long",
        [EPROTOTYPE] = "Protocol wrong type for socket",
        [ENOPROTOOPT] = "Protocol not available",
        [EPROTONOSUPPORT] = "Protocol not supported",
        [ESOCKTNOSUPPORT] = "Socket type not supported",
        [ENOTSUP] = "Operation not supported",
        [EPFNOSUPPORT] = "Protocol family not supported",
        [EAFNOSUPPORT] = "Address family not supported by protocol",
        [EADDRINUSE] = "Address already in use",
        [EADDRNOTAVAIL] = "Cannot assign requested address",
        [ENETDOWN] = "Network is down",
        [ENETUNREACH] = "Network is unreachable",
        [ENETRESET] = "Network dropped connection on reset",
        [ECONNABORTED] = "Software caused connection abort",
        [ECONNRESET] = "Connection reset by peer",
        [ENOBUFS] = "No buffer space available",
        [EISCONN] = "Transport endpoint is already connected",
        [ENOTCONN] = "Transport endpoint is not connected",
        [ESHUTDOWN] = "Cannot send after transport endpoint shutdown",
        [ETOOMANYREFS] = "Too many references: cannot splice",
        [ETIMEDOUT] = "Connection timed out",
        [ECONNREFUSED] = "Connection refused",
        [EHOSTDOWN] = "Host is down",
        [EHOSTUNREACH] = "No route to host",
        [EALREADY] = "Operation already in progress",
        [EINPROGRESS] = "Operation now in progress",
        [ESTALE] = "Stale file handle",
        [EUCLEAN] = "Structure needs cleaning",
        [ENOTNAM] = "Not a XENIX named type file",
        [ENAVAIL] = "No XENIX semaphores available",
        [EISNAM] = "Is a named type file",
        [EREMOTEIO] = "Remote I/O error",
        [EDQUOT] = "Disk quota exceeded",
        [ENOMEDIUM] = "No medium found",
        [EMEDIUMTYPE] = "Wrong medium type",
        [ECANCELED] = "Operation canceled",
        [ENOKEY] = "Required key not available",
        [EKEYEXPIRED] = "Key has expired",
        [EKEYREVOKED] = "Key has been revoked",
        [EKEYREJECTED] = "Key was rejected by service",
        [EOWNERDEAD] = "Owner died",
        [ENOTRECOVERABLE] = "State not recoverable",
        [ERFKILL] = "Operation not possible due to RF-kill",
        [EHWPOISON] = "Memory page has hardware error",
};

const char *prebind_strerror(int err) {
        static char unknown[32];

        if (err >= 0 && (size_t) err < sizeof error_texts / sizeof error_texts[0] && error_texts[err])
                return error_texts[err];
        snprintf(unknown, sizeof unknown, "Unknown error %d", err);
        return unknown;
}

const char *prebind_expand_errno(const char *format, int err, char *buf, size_t size) {
        const char *text = NULL;
        size_t o = 0;

        for (const char *p = format; *p; p++) {
                if (p[0] == '%' && p[1] == '%') {
                        if (o + 2 >= size)
                                return format;
                        buf[o++] = *p++;
                        buf[o++] = *p;
                        continue;
                }
                if (p[0] != '%' || p[1] != 'm') {
                        if (o + 1 >= size)
                                return format;
                        buf[o++] = *p;
                        continue;
                }
                if (!text)
                        text = prebind_strerror(err);
                /* No '%' in any text: it cannot become a conversion. */
                if (o + strlen(text) >= size)
                        return format;
                memcpy(buf + o, text, strlen(text));
                o += strlen(text);
                p++;
        }
        if (!text)
                return format;
        buf[o] = '\0';
        return buf;
}
