package main

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// completeCommand is the hidden command the completion scripts call:
// 'airlock __complete WORD...' prints the candidates for the last WORD
// (the one being typed, maybe ""), one a line.
const completeCommand = "__complete"

const completionUsage = `usage: airlock completion bash|zsh|fish

Prints a script that completes airlock's commands, subcommands and flags
in the shell. Load it for this shell, or install it for every new one:

  source <(airlock completion bash)        # bash, now
  airlock completion bash | sudo tee /etc/bash_completion.d/airlock >/dev/null
  source <(airlock completion zsh)         # zsh (after compinit)
  airlock completion fish > ~/.config/fish/completions/airlock.fish

The scripts ask 'airlock __complete' for the candidates, so they follow
this binary's commands.
`

const bashCompletion = `# bash completion for airlock
_airlock() {
	local cur="${COMP_WORDS[COMP_CWORD]}"
	local IFS=$'\n'
	COMPREPLY=($(compgen -W "$("${COMP_WORDS[0]}" __complete "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null)" -- "$cur"))
	if [ ${#COMPREPLY[@]} -eq 0 ]; then
		COMPREPLY=($(compgen -f -- "$cur"))
	fi
}
complete -o default -F _airlock airlock
`

const zshCompletion = `#compdef airlock
# zsh completion for airlock
_airlock() {
	local -a cands
	cands=("${(@f)$("${words[1]}" __complete "${(@)words[2,CURRENT]}" 2>/dev/null)}")
	if (( ${#cands[@]} )) && [[ -n "${cands[1]}" ]]; then
		compadd -- "${cands[@]}"
	else
		_files
	fi
}
if [ "$funcstack[1]" = "_airlock" ]; then
	_airlock "$@"
else
	compdef _airlock airlock
fi
`

const fishCompletion = `# fish completion for airlock
function __airlock_complete
	set -l words (commandline -opc)
	set -e words[1]
	airlock __complete $words (commandline -ct) 2>/dev/null
end
complete -c airlock -f -a '(__airlock_complete)'
`

func runCompletion(args []string, std stdio) error {
	if len(args) != 1 {
		return errUsage("completion", "want one shell: bash, zsh or fish")
	}
	switch args[0] {
	case "bash":
		fmt.Fprint(std.out, bashCompletion)
	case "zsh":
		fmt.Fprint(std.out, zshCompletion)
	case "fish":
		fmt.Fprint(std.out, fishCompletion)
	default:
		return errUsage("completion", "unknown shell %q (want bash, zsh or fish)", args[0])
	}
	return nil
}

// flagPattern finds the flags a usage text documents.
var flagPattern = regexp.MustCompile(`(?:^|[\s\[(,])(--?[a-z][a-z0-9-]*)`)

// runComplete prints the candidates for the last of words.
func runComplete(root *command, words []string, std stdio) error {
	cur := ""
	if len(words) > 0 {
		cur, words = words[len(words)-1], words[:len(words)-1]
	}
	for _, c := range completions(root, words, cur) {
		fmt.Fprintln(std.out, c)
	}
	return nil
}

// completions walks the tree along the words typed and returns the
// candidates that start with cur: subcommands of a group, the words a
// leaf dispatches itself, or the flags its usage text names.
func completions(root *command, words []string, cur string) []string {
	c := root
	i := 0
	for ; i < len(words) && c.run == nil; i++ {
		next := c.sub(words[i])
		if next == nil {
			return nil
		}
		c = next
	}
	var cands []string
	switch {
	case c.run == nil:
		for _, s := range c.subs {
			if !s.hidden {
				cands = append(cands, s.name)
			}
		}
	case strings.HasPrefix(cur, "-"):
		seen := map[string]bool{}
		for _, m := range flagPattern.FindAllStringSubmatch(c.usage, -1) {
			if f := m[1]; !seen[f] && f != "-" {
				seen[f] = true
				cands = append(cands, f)
			}
		}
		sort.Strings(cands)
	case i == len(words) && len(c.words) > 0:
		cands = slices.Clone(c.words)
	}
	out := cands[:0]
	for _, s := range cands {
		if strings.HasPrefix(s, cur) {
			out = append(out, s)
		}
	}
	return out
}
