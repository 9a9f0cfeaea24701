#!/usr/bin/env python3
"""Lines of src/store/ at a revision: all lines before each file's unit-test module
(`#[cfg(test)]` then `mod tests`), and of those the items compiled only for tests
(`#[cfg(test)]`, `#[cfg(feature = "test-exports")]`, `#[cfg(any(test, feature = "test-exports"))]`),
a file whose `mod` line carries one of those counting whole.

    scripts/store_lines.py [REV]    (default HEAD)
"""
import subprocess,re,sys
rev=sys.argv[1] if len(sys.argv)>1 else 'HEAD'
files=subprocess.run(['git','ls-tree','-r','--name-only',rev,'src/store'],capture_output=True,text=True).stdout.split()
TEST_ATTR=re.compile(r'^\s*#\[cfg\((test|any\(test, feature = "test-exports"\)|feature = "test-exports")\)\]\s*$')
def text(f):
    return subprocess.run(['git','show',f'{rev}:{f}'],capture_output=True,text=True).stdout
# Files that are modules declared only for tests (`#[cfg(test)] mod sim;` in disk.rs is disk/sim.rs).
MOD=re.compile(r'^\s*(pub(\([^)]*\))?\s+)?mod\s+(\w+)\s*;')
test_files=set()
for f in files:
    if not f.endswith('.rs'): continue
    lines=text(f).split('\n')
    base=f[:-len('/mod.rs')] if f.endswith('/mod.rs') else f[:-3]
    for i in range(1,len(lines)):
        m=MOD.match(lines[i])
        if m and TEST_ATTR.match(lines[i-1]):
            test_files.update({f'{base}/{m.group(3)}.rs', f'{base}/{m.group(3)}/mod.rs'})
total=0; testonly=0
for f in files:
    if not f.endswith('.rs'): continue
    lines=text(f).split('\n')
    if lines and lines[-1]=='': lines=lines[:-1]
    # stop at #[cfg(test)] followed by mod tests
    n=len(lines)
    for i in range(1,len(lines)):
        if lines[i-1].strip()=='#[cfg(test)]' and re.match(r'^mod tests',lines[i]): n=i-1; break
    lines=lines[:n]; total+=n
    if f in test_files:
        testonly+=n; continue
    i=0
    while i<n:
        if TEST_ATTR.match(lines[i]):
            # item span: from attr to matching close of first brace (or ; if none before)
            j=i+1; depth=0; opened=False
            while j<n:
                for ch in lines[j]:
                    if ch=='{': depth+=1; opened=True
                    elif ch=='}': depth-=1
                if opened and depth==0: break
                if not opened and lines[j].rstrip().endswith(';'): break
                j+=1
            testonly+=j-i+1; i=j+1
        else: i+=1
print(f'{rev}: {total} lines before unit-test modules, {testonly} in items compiled only for tests, {total-testonly} in a release build')
