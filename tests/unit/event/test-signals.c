/* SPDX-License-Identifier: MIT */
/* signal_classify(): the forwarding rule shared by the supervisor and
 * --accept; signals_reset(): what every child gets before exec. */
#include <check.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "signals.h"
#include "unit.h"

static struct signalfd_siginfo info(int sig, int code, pid_t pid) {
        struct signalfd_siginfo si = { .ssi_signo = (uint32_t) sig, .ssi_code = code, .ssi_pid = (uint32_t) pid };
        return si;
}

START_TEST(test_sigchld_is_reaped_never_forwarded) {
        struct signalfd_siginfo si = info(SIGCHLD, CLD_EXITED, 1234);
        struct signal_verdict v = signal_classify(&si, false);

        ck_assert(v.reap);
        ck_assert(!v.forward && !v.shutdown && !v.own && !v.stop_self);
}
END_TEST

START_TEST(test_own_sigpipe_is_dropped_anothers_forwarded) {
        struct signalfd_siginfo own = info(SIGPIPE, SI_USER, getpid()), other = info(SIGPIPE, SI_USER, 1);
        struct signal_verdict v = signal_classify(&own, false);

        ck_assert(v.own && !v.forward);
        v = signal_classify(&other, false);
        ck_assert(!v.own && v.forward);
}
END_TEST

START_TEST(test_kill_is_forwarded_terminal_is_not_unless_group) {
        struct signalfd_siginfo user = info(SIGINT, SI_USER, 1), tty = info(SIGINT, SI_KERNEL, 0);

        ck_assert(signal_classify(&user, false).forward);
        ck_assert(signal_classify(&user, true).forward);
        ck_assert(!signal_classify(&tty, false).forward); /* COMMAND got its own copy */
        ck_assert(signal_classify(&tty, true).forward);   /* it did not: other group */
        ck_assert(signal_classify(&user, false).shutdown && signal_classify(&tty, false).shutdown);
}
END_TEST

START_TEST(test_shutdown_signals) {
        struct signalfd_siginfo term = info(SIGTERM, SI_USER, 1), hup_user = info(SIGHUP, SI_USER, 1),
                                hup_tty = info(SIGHUP, SI_KERNEL, 0), usr1 = info(SIGUSR1, SI_USER, 1);

        ck_assert(signal_classify(&term, false).shutdown);
        ck_assert(!signal_classify(&hup_user, false).shutdown); /* a reload, or a restart request */
        ck_assert(signal_classify(&hup_tty, false).shutdown);   /* the terminal went away */
        ck_assert(!signal_classify(&usr1, false).shutdown);
}
END_TEST

START_TEST(test_terminal_stops_stop_prebind_too) {
        int stops[] = { SIGTSTP, SIGTTIN, SIGTTOU };

        for (size_t i = 0; i < 3; i++) {
                struct signalfd_siginfo tty = info(stops[i], SI_KERNEL, 0), user = info(stops[i], SI_USER, 1);
                struct signal_verdict v = signal_classify(&tty, false);

                ck_assert(v.stop_self && !v.forward);
                v = signal_classify(&user, false);
                ck_assert(!v.stop_self && v.forward); /* kill -TSTP: for COMMAND */
        }
}
END_TEST

START_TEST(test_realtime_and_faults_sent_by_kill_are_forwarded) {
        int sigs[] = { SIGRTMIN, SIGRTMAX, SIGSEGV, SIGUSR2, SIGWINCH, SIGCONT };

        for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
                struct signalfd_siginfo si = info(sigs[i], SI_USER, 1);
                struct signal_verdict v = signal_classify(&si, false);
                ck_assert(v.forward && !v.reap && !v.own && !v.shutdown && !v.stop_self);
        }
}
END_TEST

/* In a child: SIGUSR1 blocked, SIGUSR2 and SIGRTMIN+1 ignored, then
 * signals_reset(); exits 0 if the result is right. */
static void reset_child(bool dispositions_are_default) {
        struct sigaction old;
        sigset_t set, now;

        sigemptyset(&set);
        sigaddset(&set, SIGUSR1);
        sigprocmask(SIG_BLOCK, &set, NULL);
        signal(SIGUSR2, SIG_IGN);
        signal(SIGRTMIN + 1, SIG_IGN);
        signals_reset(dispositions_are_default);
        sigprocmask(SIG_SETMASK, NULL, &now);
        if (sigismember(&now, SIGUSR1))
                exit(10);
        for (int sig = 1; sig < NSIG; sig++)
                if (sigismember(&now, sig))
                        exit(11);
        sigaction(SIGUSR2, NULL, &old);
        if ((old.sa_handler == SIG_IGN) != dispositions_are_default)
                exit(12);
        sigaction(SIGRTMIN + 1, NULL, &old);
        if ((old.sa_handler == SIG_IGN) != dispositions_are_default)
                exit(13);
        exit(0);
}

START_TEST(test_reset_before_exec) {
        bool dispositions_are_default = _i;
        pid_t pid = unit_fork();
        int status;

        if (pid == 0)
                reset_child(dispositions_are_default);
        status = unit_wait_bounded(pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "dispositions_are_default=%d: status %#x",
                      dispositions_are_default, status);
}
END_TEST

int main(void) {
        Suite *s = suite_create("signals");
        TCase *tc = tcase_create("classify");

        tcase_add_test(tc, test_sigchld_is_reaped_never_forwarded);
        tcase_add_test(tc, test_own_sigpipe_is_dropped_anothers_forwarded);
        tcase_add_test(tc, test_kill_is_forwarded_terminal_is_not_unless_group);
        tcase_add_test(tc, test_shutdown_signals);
        tcase_add_test(tc, test_terminal_stops_stop_prebind_too);
        tcase_add_test(tc, test_realtime_and_faults_sent_by_kill_are_forwarded);
        suite_add_tcase(s, tc);
        tc = tcase_create("reset");
        /* 0: every disposition back to the default; 1: only the mask. */
        tcase_add_loop_test(tc, test_reset_before_exec, 0, 2);
        suite_add_tcase(s, tc);
        return unit_run(s);
}
