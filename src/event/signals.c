/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <unistd.h>

#include "compat.h"
#include "signals.h"

struct signal_verdict signal_classify(const struct signalfd_siginfo *si, bool command_has_own_group) {
        int sig = (int) si->ssi_signo;
        bool from_terminal = si->ssi_code == SI_KERNEL;
        struct signal_verdict v = {};

        if (sig == SIGCHLD) {
                v.reap = true;
                return v;
        }
        /* Writing to a reader that went away: the kernel's SIGPIPE carries
         * our own pid. */
        if (sig == SIGPIPE && si->ssi_pid == (uint32_t) getpid()) {
                v.own = true;
                return v;
        }
        v.shutdown = sig == SIGTERM || sig == SIGINT || (sig == SIGHUP && from_terminal);
        /* The kernel sends terminal signals (Ctrl-C, Ctrl-\, Ctrl-Z, hangup,
         * SIGWINCH) to the whole foreground process group. Unless --group
         * moved it out, COMMAND is in that group and has its own copy:
         * forwarding would deliver it twice. */
        v.forward = !from_terminal || command_has_own_group;
        /* Ctrl-Z: stop along with COMMAND, so that the shell sees the whole
         * job stopped; "fg" continues both (SIGCONT is forwarded too). */
        v.stop_self = from_terminal && (sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU);
        return v;
}

/* The faults (SIGSEGV…) may be blocked too: a real fault is forced
 * through by the kernel and still kills prebind, while the same signal
 * sent with kill() is forwarded like any other. */
int signals_block_all(void) {
        bool blocked[NSIG] = {};
        sigset_t mask;
        int fd;

        sigemptyset(&mask);
        for (int sig = 1; sig < NSIG; sig++)
                blocked[sig] = sig != SIGKILL && sig != SIGSTOP && prebind_sigaddset(&mask, sig) == 0;
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
                return -errno;
        /* Blocked first, defaults after: SIGPIPE, ignored since main(),
         * is never at its default while it could be delivered. */
        for (int sig = 1; sig < NSIG; sig++)
                if (blocked[sig])
                        signal(sig, SIG_DFL);
        fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        return fd < 0 ? -errno : fd;
}

void signals_drain(int signal_fd, bool command_has_own_group, signal_handler handler, void *userdata) {
        struct signalfd_siginfo si;

        while (read(signal_fd, &si, sizeof si) == sizeof si)
                handler(&si, signal_classify(&si, command_has_own_group), userdata);
}

void signals_reset(bool dispositions_are_default) {
        sigset_t none;

        for (int sig = 1; sig < NSIG && !dispositions_are_default; sig++)
                if (sig != SIGKILL && sig != SIGSTOP)
                        signal(sig, SIG_DFL);
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
}
