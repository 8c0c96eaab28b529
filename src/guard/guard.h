/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* The guard: COMMAND does not outlive prebind, even when prebind is
 * SIGKILLed.
 *
 * COMMAND itself gets the kernel's parent-death signal (spawn.c); but that
 * is cleared by a set-user-ID exec or a change of credentials, and never
 * reaches the rest of a --group process group. So a small process watches
 * prebind from outside: a grandchild of prebind in a process group of its
 * own (a kill of prebind's process group, or of prebind's process tree,
 * does not take it along), on prebind's memory (guard.c says how), that holds
 * one end of a socket pair and nothing else of prebind's fds — no
 * listening socket, no pipe, not stdin or stdout. prebind
 * tells it over the socket which COMMANDs run (every generation alive,
 * each with its pidfd) and which files it creates (the --port-file, unix
 * socket files). When the socket reaches EOF without a word from prebind,
 * prebind is dead: the guard sends SIGTERM to each COMMAND (and its
 * group), removes the files that are still prebind's,
 * sends SIGKILL to what is left after the grace, and exits. On a clean
 * exit prebind says so and waits until the guard is gone.
 *
 * Every function takes NULL for "no guard" (--exec, --no-die-with-supervisor,
 * prebind as PID 1) and then does nothing. Messages are sent without
 * waiting: a guard that is gone or stopped is warned about once, and
 * prebind goes on without it. */
struct guard;

enum guard_file_kind {
        GUARD_FILE_REGULAR, /* the port file, and its temporary name */
        GUARD_FILE_SOCKET,  /* a unix socket file */
        /* A flock(2) lock file under which prebind's socket files are
         * made and removed by everyone who uses them (--share's claim):
         * the guard takes the lock before it removes anything, and
         * removes the lock file last, only once none of the socket files
         * it guards is there any more (else another one's claim is it). */
        GUARD_FILE_LOCK,
};

/* Start a guard. command_name is for its message; grace_usec how long
 * COMMAND has between SIGTERM and SIGKILL once prebind is dead. Returns 0
 * or -errno (the guard could not be started). */
int guard_start(const char *command_name, uint64_t grace_usec, struct guard **ret);

/* prebind is done (COMMAND gone, files removed): the guard exits without
 * doing anything, and prebind waits for that (bounded). */
void guard_free(struct guard *g);

/* A COMMAND runs as pid (pidfd: its pidfd, or -1), leading a process
 * group of its own if group. Added to those watched: every generation
 * alive is (the serving one, a new one starting beside it, those told to
 * stop that still run), and a killed prebind's guard stops them all. */
void guard_watch(struct guard *g, pid_t pid, int pidfd, bool group);

/* In a child of prebind that is about to exec COMMAND, sharing prebind's
 * memory (clone(CLONE_VM | CLONE_VFORK)): as guard_watch() for itself,
 * before its exec. Changes nothing in g, logs nothing: a guard that does
 * not get it hears of the child from prebind (guard_watch()) too. */
void guard_watch_self(const struct guard *g, bool group);

/* The COMMAND that ran as pid, and its group, are gone: nothing of it to
 * stop. */
void guard_unwatch(struct guard *g, pid_t pid);

/* prebind is about to create a file at path: call before it exists.
 * Should prebind die before guard_file_created(), the guard removes what
 * is there only if no one else can have made it: a socket nobody listens
 * on, or a regular file at a temporary name of prebind's own. */
void guard_file_expected(struct guard *g, enum guard_file_kind kind, const char *path);

/* The file at path exists now, and fd is open on it: the guard keeps a
 * copy, and removes path only while it is still that file. */
void guard_file_created(struct guard *g, enum guard_file_kind kind, const char *path, int fd);

/* As guard_file_created(), for a file known by its device and inode (a
 * unix socket file: prebind holds the socket, not the file). If what is at
 * path is not that file, the guard forgets path. */
void guard_file_created_at(struct guard *g, enum guard_file_kind kind, const char *path, dev_t dev, ino_t ino);

/* path is not prebind's to remove (any more). */
void guard_file_forget(struct guard *g, const char *path);
