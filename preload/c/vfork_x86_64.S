/*
 * vfork for x86_64 (see proc.c): the same sequence as glibc's vfork (the
 * return address is kept in a register, since the child will overwrite the
 * stack slot), plus setting sdp_vfork_child in the child and restoring its
 * previous value in the parent. The kernel preserves every register but
 * rax, rcx and r11 across syscall, in the child as in the parent.
 * Before the system call, sdp_vfork_prepare (proc.c) lets the core switch
 * the connections the child may take into an exec to kernel TCP.
 */
#if defined(__x86_64__)
	.text
	.globl	vfork
	.type	vfork, @function
	.p2align 4
vfork:
	.cfi_startproc
#ifdef __CET__
	endbr64
#endif
	subq	$8, %rsp				/* align the stack for the call */
	.cfi_adjust_cfa_offset 8
	call	sdp_vfork_prepare
	addq	$8, %rsp
	.cfi_adjust_cfa_offset -8
	movq	sdp_vfork_child@gottpoff(%rip), %rsi	/* TLS offset of the flag */
	movl	%fs:(%rsi), %edx			/* its value, for the parent */
	popq	%rdi					/* return address */
	.cfi_adjust_cfa_offset -8
	.cfi_register rip, rdi
	movl	$58, %eax				/* SYS_vfork */
	syscall
	pushq	%rdi
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset rip, 0
	cmpl	$-4095, %eax
	jae	.Lerror
	testl	%eax, %eax
	jnz	.Lparent
	movl	$1, %fs:(%rsi)				/* child */
	ret
.Lparent:
	movl	%edx, %fs:(%rsi)			/* the child may have set it */
	ret
.Lerror:
	negl	%eax
	movl	%eax, %edi
	jmp	sdp_vfork_error
	.cfi_endproc
	.size	vfork, .-vfork
#endif
	.section .note.GNU-stack,"",@progbits
