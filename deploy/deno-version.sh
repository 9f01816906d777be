#!/bin/sh
# Prints the Deno version the relay is built and tested with: `denoVersion` in deno.json, the
# one place it is written (CI, the package scripts and the relay itself read it there).
sed -n 's/^ *"denoVersion": *"\([^"]*\)".*/\1/p' "$(dirname "$0")/../deno.json"
