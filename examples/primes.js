// Runs with node in a fresh sandbox: `bin/airlock run examples/primes.js`
const primes = []
for (let n = 2; primes.length < 10; n++) {
  if (primes.every((p) => n % p !== 0)) primes.push(n)
}
console.log(`the first ten primes: ${primes.join(' ')}`)
