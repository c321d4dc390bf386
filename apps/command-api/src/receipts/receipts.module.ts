import { Module } from '@nestjs/common';
import { GetReceiptHttpController } from './get-receipt.http.controller';
import { ReceiptSweeper } from './receipt-sweeper.service';

@Module({
  controllers: [GetReceiptHttpController],
  providers: [ReceiptSweeper],
})
export class ReceiptsModule {}
